// The diff's table and JUnit XML (regression_report.h).
#include "sim/report/regression_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/html_report.h"

namespace ascendsim::report {

using sim::DiffResult;

namespace {
std::string percent(double r) {
  if (std::isinf(r)) return r > 0 ? "new" : "-new";
  return fmt::format("{:+.3f}%", 100 * r);
}
}  // namespace

std::string diff_table(const DiffResult& d, double tolerance, bool all) {
  std::size_t wr = 3, wf = 6;
  for (const auto& f : d.figures) {
    wr = std::max(wr, f.run.size());
    wf = std::max(wf, f.figure.size());
  }
  std::string out =
      fmt::format("{:<{}}  {:<{}}  {:>16}  {:>16}  {:>10}\n", "run", wr, "figure", wf, "base", "new", "change");
  int moved = 0, past = 0;
  for (const auto& f : d.figures) {
    if (f.relative == 0 && !all) continue;
    ++moved;
    past += f.past_tolerance;
    out += fmt::format("{:<{}}  {:<{}}  {:>16.9g}  {:>16.9g}  {:>10}{}\n", f.run, wr, f.figure, wf, f.base, f.now,
                       percent(f.relative), f.past_tolerance ? "  past tolerance" : "");
  }
  out += fmt::format("\n{} figure(s) compared, {} moved, {} past the tolerance of {:g}%\n", d.figures.size(), moved,
                     past, 100 * tolerance);
  return out;
}

std::string diff_junit(const DiffResult& d, double tolerance) {
  const auto esc = escape_xml;
  int failures = 0;
  for (const auto& f : d.figures) failures += f.past_tolerance;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites><testsuite name=\"ascendsim diff\" tests=\"{}\" failures=\"{}\">\n", d.figures.size(),
                     failures);
  for (const auto& f : d.figures) {
    out += fmt::format("  <testcase classname=\"{}\" name=\"{}\"", esc(f.run), esc(f.figure));
    if (!f.past_tolerance) {
      out += "/>\n";
      continue;
    }
    out += fmt::format(
        "><failure message=\"{} moved {} (tolerance {:g}%)\">base {:.9g}, new {:.9g}</failure></testcase>\n",
        esc(f.figure), esc(percent(f.relative)), 100 * tolerance, f.base, f.now);
  }
  out += "</testsuite></testsuites>\n";
  return out;
}

}  // namespace ascendsim::report
