#include "apps/plot/metrics_lines.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/regular_file.h"
#include "core/sealed_json.h"

namespace frugal::cli {

void for_each_metrics_line(const std::string& path, const std::function<void(nlohmann::json&)>& each) {
  for_each_numbered_metrics_line(path, [&](nlohmann::json& j, size_t) { each(j); });
}

void for_each_numbered_metrics_line(const std::string& path,
                                    const std::function<void(nlohmann::json&, size_t line)>& each) {
  std::error_code missing;
  if (!std::filesystem::exists(path, missing)) throw Error(fmt::format("cannot read the metrics file {}: no such file", path));
  std::ifstream in = open_regular_file(path, "a metrics file (one JSON object a line)", std::ios::in);
  std::string text;
  for (size_t line = 1; std::getline(in, text); ++line) {
    if (text.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}:{}: not a JSON line ({})", path, line, json_error_words(e)));
    }
    each(j, line);
  }
}

std::vector<nlohmann::json> read_epoch_lines(const std::string& path) {
  std::vector<nlohmann::json> epochs;
  for_each_numbered_metrics_line(path, [&](nlohmann::json& line, size_t number) {
    if (!line.is_object()) return;
    const auto event = line.find("event"), rank = line.find("rank"), epoch = line.find("epoch");
    if (event == line.end() || !event->is_string() || event->get<std::string>() != "epoch") return;
    if (rank != line.end() && !(rank->is_number() && rank->get<double>() == 0)) return;  // another rank's line
    FRUGAL_CHECK(epoch != line.end() && epoch->is_number_unsigned(),
                 fmt::format("{}:{}: an epoch line without a whole epoch number (\"epoch\": 1, 2, ...)", path, number));
    epochs.push_back(std::move(line));
  });
  return epochs;
}

}  // namespace frugal::cli
