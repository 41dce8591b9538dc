// Reading a command line: the options parsed and checked, --help answered, and the values the
// options take (whole numbers, step windows, lists, shares); one output written.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/commands/messages.h"
#include "sim/commands/options.h"
#include "sim/core/error.h"
#include "sim/outputs.h"

namespace ascendsim::sim::cli {

/// `s` as a whole number if all of it is one.
std::optional<std::int64_t> whole_number(const std::string& s) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

/// `flag`'s A:B — steps A to B-1, numbered from 1 as every output numbers them — as the library's
/// 0-based step indices [A-1, B-1).
std::pair<std::int64_t, std::int64_t> parse_step_window(const std::string& s, const std::string& flag) {
  if (s.empty()) return {0, INT64_MAX};
  const auto colon = s.find(':');
  const auto a = colon == std::string::npos ? std::nullopt : whole_number(s.substr(0, colon));
  const auto b = colon == std::string::npos ? std::nullopt : whole_number(s.substr(colon + 1));
  if (!a || !b || *a < 1 || *b <= *a)
    throw InputError(flag + " '" + s +
                     "': expected A:B, steps A to B-1 with 1 <= A < B (steps are numbered from 1), e.g. 100:120");
  return {*a - 1, *b - 1};
}

/// Parses the options; a word that is not an option's value is an error, not silently ignored.
po::variables_map parse_options(int argc, char* argv[], const po::options_description& desc, const std::string& command,
                                const po::positional_options_description* positional) {
  auto parser = po::command_line_parser(argc, argv).options(desc);
  if (positional) parser.positional(*positional);
  const po::parsed_options parsed = parser.run();
  for (const auto& opt : parsed.options)
    if (opt.position_key >= 0 && !positional) {
      const std::string word = opt.value.empty() ? std::string() : opt.value.front();
      throw InputError("unexpected argument '" + word + "': options take the form --name value (see `ascendsim " +
                       command + " --help`)");
    }
  po::variables_map vm;
  po::store(parsed, vm);
  return vm;
}

bool parse(int argc, char* argv[], const po::options_description& desc, const std::string& command,
           const po::positional_options_description* positional) {
  po::variables_map vm = parse_options(argc, argv, desc, command, positional);
  if (vm.count("help")) {
    std::cout << "usage: ascendsim " << command << " [options]\n\n" << desc << "\n";
    return false;
  }
  if (vm.count("model")) {
    const auto model = vm["model"].as<std::string>();
    if (vm.count("workload") && !vm["workload"].defaulted())
      throw InputError("--model " + model + ": the ONNX file is the network, instead of --workload " +
                       vm["workload"].as<std::string>() + "; give one of the two");
    typed()["workload"] = "--model " + model;  // an error about the network names the file
  }
  po::notify(vm);
  return true;
}

/// Writes one output (checked, staged, put in place).
void write_output(const std::string& path, const std::string& text, const std::string& option) {
  Outputs out;
  out.add(path, option);
  out.stage(path, text);
  out.commit();
}

std::vector<std::string> split_list(const std::string& s, const std::string& option) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InputError(option + " '" + s + "': empty item; give a comma-separated list");
    out.push_back(item);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::vector<std::string> comma_list(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = s.find(',', from);
    out.push_back(s.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

/// A non-negative share given as a percentage ("1%") or, without the sign, as a fraction ("0.01")
/// or, if `bare_is_percent`, as a percentage ("15").
double parse_share(const std::string& text, const std::string& option, bool bare_is_percent) {
  double v = -1;
  const bool pct = !text.empty() && text.back() == '%';
  const std::string num = pct ? text.substr(0, text.size() - 1) : text;
  try {
    std::size_t used = 0;
    v = std::stod(num, &used) / (pct || bare_is_percent ? 100.0 : 1.0);
    if (used != num.size()) v = -1;
  } catch (const std::exception&) {
    v = -1;
  }
  if (!(v >= 0) || !std::isfinite(v))
    throw InputError(option + " '" + text + "': give a non-negative " +
                     (bare_is_percent ? "percentage, e.g. 15%" : "fraction (0.01) or percentage (1%)"));
  return v;
}

}  // namespace ascendsim::sim::cli
