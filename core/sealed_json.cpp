#include "core/sealed_json.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/crc32c.h"

namespace frugal {
namespace {

std::string seal_of(nlohmann::json object) {
  object.erase(kManifestChecksumField);
  const std::string text = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return fmt::format("{:08x}", crc32c(std::as_bytes(std::span<const char>(text.data(), text.size()))));
}

}  // namespace

void seal_json(nlohmann::json& object) { object[kManifestChecksumField] = seal_of(object); }

bool check_json_seal(const nlohmann::json& object, const std::string& file, bool accept_unsealed,
                     const std::string& flag) {
  const auto it = object.find(kManifestChecksumField);
  if (it == object.end()) {
    if (accept_unsealed) return false;
    throw Error(fmt::format("{}: has no '{}' (written by a frugal before manifests were checked, or edited): "
                            "pass {} to load it unchecked",
                            file, kManifestChecksumField, flag));
  }
  if (!it->is_string() || it->get<std::string>() != seal_of(object))
    throw Error(fmt::format("{}: '{}' does not match its contents: the manifest was damaged or edited after "
                            "frugal wrote it (to load an edited one on purpose, delete that field and pass {})",
                            file, kManifestChecksumField, flag));
  return true;
}

std::string json_error_words(const nlohmann::json::exception& e) {
  if (const auto* parse = dynamic_cast<const nlohmann::json::parse_error*>(&e))
    return parse->byte > 0 ? fmt::format("a JSON syntax error at byte {}", parse->byte) : "not JSON";
  if (dynamic_cast<const nlohmann::json::type_error*>(&e) != nullptr) return "a value of the wrong type";
  if (dynamic_cast<const nlohmann::json::out_of_range*>(&e) != nullptr) return "a missing field or a value out of range";
  return "malformed JSON";
}

}  // namespace frugal
