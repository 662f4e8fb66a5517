// A JSON object that carries its own checksum, so that a manifest edited or damaged after frugal
// wrote it is refused rather than trusted: "manifest_checksum" holds the CRC32C (8 hex digits) of the
// object's compact dump without that field. Internal (checkpoint manifests use it): the public API
// stays free of JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace frugal {

inline constexpr const char* kManifestChecksumField = "manifest_checksum";

// Sets object["manifest_checksum"] to the CRC32C of the rest of the object.
void seal_json(nlohmann::json& object);

// Refuses (frugal::Error naming `file`) a sealed object whose checksum does not match, and an
// unsealed one unless `accept_unsealed` (the user's --accept-unchecked-checkpoint; `flag` names it
// in the message). Returns whether the object was sealed.
bool check_json_seal(const nlohmann::json& object, const std::string& file, bool accept_unsealed,
                     const std::string& flag = "--accept-unchecked-checkpoint");

// What a nlohmann::json exception means, in words for a user (no library text): "a JSON syntax error
// at byte 12", "a value of the wrong type", ...
std::string json_error_words(const nlohmann::json::exception& e);

}  // namespace frugal
