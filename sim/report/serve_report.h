// The serving report (docs/reports.md, "Serving reports"): its JSON, the text printed on stdout
// and the HTML page, from a serve() outcome.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/serve.h"

namespace ascendsim::report {

nlohmann::ordered_json serve_json(const sim::ServeOutcome& o);
std::string serve_text(const sim::ServeOutcome& o);
std::string serve_html(const sim::ServeOutcome& o);
/// The same, from serve_json() already made.
std::string serve_text(const sim::ServeOutcome& o, const nlohmann::ordered_json& report);
std::string serve_html(const sim::ServeOutcome& o, const nlohmann::ordered_json& report);

}  // namespace ascendsim::report
