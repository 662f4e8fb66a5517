#include "apps/comm_flags.h"

#include "comm/init_flags.h"

namespace frugal::cli {

void CommFlags::add_to(CLI::App* cmd) {
  for (const comm::InitFlag& f : comm::init_flags()) {
    Given& given = values_[f.variable];
    given.flag = f.flag;
    given.check = f.check;
    CLI::Option* o = cmd->add_option(std::string(f.flag), given.value, f.help);
    o->group(std::string(comm::kInitFlagGroup));
    if (!f.choices.empty()) o->check(CLI::IsMember(f.choices));
    if (f.existing_file) o->check(CLI::ExistingFile);
  }
}

void CommFlags::check() const {
  for (const auto& [variable, given] : values_) {
    if (given.value && given.check) given.check(given.flag, *given.value);
  }
}

bool CommFlags::has_flag(std::string_view flag) const {
  for (const auto& [variable, g] : values_)
    if (g.flag == flag) return true;
  return false;
}

std::optional<std::string> CommFlags::given(std::string_view variable) const {
  const auto it = values_.find(variable);
  return it == values_.end() ? std::nullopt : it->second.value;
}

comm::InitOptions CommFlags::init_options(comm::RunConfig run_config) const {
  comm::InitOptions o{.run_config = std::move(run_config)};
  for (const auto& [variable, given] : values_) {
    if (given.value) o.settings[std::string(variable)] = {*given.value, given.flag};
  }
  return o;
}

}  // namespace frugal::cli
