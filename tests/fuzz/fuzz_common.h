// Shared by the fuzz targets: rejections a parser may give for bad input. Anything else — a crash,
// a sanitizer report, another exception, a hang — is a finding.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "sim/core/error.h"

namespace ascendsim::fuzz {

template <typename F>
void expect_accept_or_reject(F&& f) {
  try {
    f();
  } catch (const sim::InputError&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::runtime_error& e) {  // the dataset parsers' rejections name the file
    if (std::string(e.what()).find(':') == std::string::npos) throw;
  }
}

inline std::string as_string(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ascendsim::fuzz
