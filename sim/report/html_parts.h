// What the HTML pages (html_compare.cpp, html_sweep.cpp, html_validation.cpp, serve_report.cpp)
// share: the page around a body, legends and markers, the line chart, the time to train. Internal
// to sim/report/.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "sim/report/html_report.h"

namespace ascendsim::report::html {

using runtime::RunResult;
using runtime::Strategy;
using runtime::TimeToTrain;

/// escape_xml(s).
std::string esc(const std::string& s);
const char* color_of(Strategy s);
const char* phase_color(std::size_t p);

/// A whole page: its title as the heading, the shared style, `body`.
std::string page(const std::string& title, const std::string& body);
/// `s` escaped, with a line break allowed after each comma and before each opening parenthesis.
std::string breakable(const std::string& s);
/// "ascend910 (atlas800-9000 server)", escaped: the chip and the server it sits in.
std::string chip_and_server(const ReportHeader& h);

constexpr double kLegendRow = 18;

struct Legend {
  std::string svg;
  double bottom = 0;  ///< below the last row of entries
};

/// Colour swatches with their labels from (x, y), in rows that break before `right`.
Legend legend(const std::vector<std::pair<std::string, std::string>>& items, double x, double y, double right);

/// A strategy's marker centred on (x, y), `r` px from its centre to its box's sides: a circle,
/// square, diamond or triangle by strategy; `outlined` draws it with a white edge.
std::string marker(Strategy st, double x, double y, double r, const std::string& title,
                   const std::string& cls = "point", bool outlined = false);

struct LineLegend {
  std::string svg;
  double bottom = 0;  ///< below the last row
};

/// A line chart's legend from (x, y): per series a sample of its line with its marker and its
/// name, in rows that break before `right`; then the notes, wrapped.
LineLegend line_legend(const std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>>& series,
                       const std::vector<std::string>& notes, double x, double y, double right);

/// The widest of these labels at `font_px`.
double widest(const std::vector<std::string>& labels, double font_px = 12);

std::vector<std::string> strategy_names(const std::vector<RunResult>& runs);

struct Axis {
  std::string label;
  bool log = false;      ///< logarithmic (values > 0)
  bool integer = false;  ///< whole-number ticks
};

using Series = std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>>;

/// A line chart with nice ticks on both axes; `mark_x` (if > 0) draws a marked vertical line.
/// `ref_y` (if > 0) draws a dashed horizontal reference line labelled `ref_label`. `notes` are
/// sentences printed under the chart, wrapped to its width.
std::string line_chart(const std::string& id, const std::string& label, const Axis& xa, const Axis& ya,
                       const std::string& y_unit, const Series& series, double mark_x = 0,
                       const std::string& mark_label = {}, double ref_y = 0, const std::string& ref_label = {},
                       const std::vector<std::string>& notes = {});

/// Time to train, one stacked bar per row (a strategy, or a swept value and strategy), and the
/// same figures as a table.
std::string time_to_train_section(const std::string& id, const std::string& row_heading,
                                  const std::vector<std::pair<std::string, TimeToTrain>>& rows);
/// The note that goes with it.
extern const char* kTimeToTrainNote;

}  // namespace ascendsim::report::html
