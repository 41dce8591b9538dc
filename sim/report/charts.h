// What every chart of the HTML reports shares: two colour-blind-safe palettes that never overlap
// (strategies: Okabe-Ito; time phases: Paul Tol's "muted"), dash patterns for series that may
// coincide, and "nice" axis ticks (1-2-5 steps, linear or logarithmic).
#pragma once

#include <string>
#include <vector>

#include "runtime/session.h"
#include "sim/core/breakdown.h"

namespace ascendsim::report::charts {

using runtime::Strategy;


const char* strategy_color(Strategy s);
const char* phase_color(sim::Phase p);
/// A dash pattern per strategy ("" solid), so coinciding lines stay visible.
const char* strategy_dash(Strategy s);

/// Ticks covering [lo, hi] at 1, 2 or 5 times a power of ten, about `target` of them; whole
/// numbers only if `integer`.
std::vector<double> nice_ticks(double lo, double hi, int target = 5, bool integer = false);
/// Powers of ten covering [lo, hi] (lo > 0), for a logarithmic axis.
std::vector<double> log_ticks(double lo, double hi);
/// A tick label: no trailing zeros, no exponent below 10^6.
std::string tick_label(double v);
/// A count in at most four characters and a suffix: exact below 10,000, else three significant
/// digits with k, M or G (273750 -> "274k"), for labels that must fit a narrow bar.
std::string count_label(double v);

/// The width in px of `text` set at `font_px` in DejaVu Sans, the widest of the common sans-serif
/// faces (and the one Debian's browsers use for system-ui): charts size their margins and legends
/// with it, so labels fit in any of the fonts the page may get. Characters beyond ASCII count as
/// one em. Deterministic: the same text gives the same width everywhere.
double text_width(const std::string& text, double font_px = 12);
/// `text` broken at spaces into lines at most `width` px wide (a word longer than that alone).
std::vector<std::string> wrap(const std::string& text, double width, double font_px = 12);

}  // namespace ascendsim::report::charts
