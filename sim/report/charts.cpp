#include "sim/report/charts.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace ascendsim::report::charts {

using namespace runtime;

const char* strategy_color(Strategy s) {
  // Okabe & Ito, "Color Universal Design": orange, sky blue, bluish green, vermillion.
  static const char* kColors[] = {"#e69f00", "#56b4e9", "#009e73", "#d55e00"};
  return kColors[static_cast<int>(s)];
}

const char* phase_color(sim::Phase p) {
  // Paul Tol's "muted" scheme (and its pale grey), one colour per phase in stacking order; the
  // checkpoints' orange from his "light" scheme.
  static const char* kColors[sim::kPhaseCount] = {"#cc6677", "#332288", "#ddcc77", "#117733", "#88ccee", "#882255",
                                                  "#44aa99", "#999933", "#aa4499", "#dddddd", "#6f6f6f",
                                                  "#ee8866"};
  return kColors[static_cast<std::size_t>(p)];
}

const char* strategy_dash(Strategy s) {
  static const char* kDash[] = {"", "8 4", "3 3", "12 3 3 3"};
  return kDash[static_cast<int>(s)];
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integer) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  if (integer) step = std::max(1.0, std::round(step));
  std::vector<double> out;
  for (double v = std::floor(lo / step) * step; v <= hi + step * 1e-9; v += step)
    out.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  if (out.empty() || out.back() < hi) out.push_back(out.empty() ? hi : out.back() + step);
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi)); ++e) out.push_back(std::pow(10, e));
  return out;
}

std::string tick_label(double v) {
  if (std::fabs(v) >= 1e6) return fmt::format("{:.3g}", v);
  std::string s = fmt::format("{:.6f}", v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string count_label(double v) {
  const double a = std::fabs(v);
  if (a < 1e4) return fmt::format("{:.0f}", v);
  static const char* kSuffix[] = {"k", "M", "G", "T"};
  int k = 0;
  double m = v / 1e3;
  while (std::fabs(m) >= 999.5 && k < 3) {
    m /= 1e3;
    ++k;
  }
  // Three significant digits, no trailing zeros after a decimal point: 274k, 1.2M, 12.5M.
  const int decimals = std::fabs(m) >= 99.95 ? 0 : std::fabs(m) >= 9.995 ? 1 : 2;
  std::string s = fmt::format("{:.{}f}", m, decimals);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s + kSuffix[k];
}

double text_width(const std::string& text, double font_px) {
  // DejaVu Sans advance widths of ' ' to '~' in font units (2048 per em).
  static const int kAdvance[95] = {
      651,  821,  942,  1716, 1303, 1946, 1597, 563,  799,  799,  1024, 1716, 651,  739,  651,  690,  1303, 1303, 1303,
      1303, 1303, 1303, 1303, 1303, 1303, 1303, 690,  690,  1716, 1716, 1716, 1087, 2048, 1401, 1405, 1430, 1577, 1294,
      1178, 1587, 1540, 604,  604,  1343, 1141, 1767, 1532, 1612, 1235, 1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403,
      1251, 1403, 799,  690,  799,  1716, 1024, 1024, 1255, 1300, 1126, 1300, 1260, 721,  1300, 1298, 569,  569,  1186,
      569,  1995, 1298, 1253, 1300, 1300, 842,  1067, 803,  1298, 1212, 1675, 1212, 1212, 1075, 1303, 690,  1303, 1716};
  double units = 0;
  for (unsigned char c : text) {
    if (c >= 32 && c < 127)
      units += kAdvance[c - 32];
    else if ((c & 0xC0) != 0x80)  // the first byte of a character beyond ASCII
      units += 2048;
  }
  return units / 2048 * font_px;
}

std::vector<std::string> wrap(const std::string& text, double width, double font_px) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string word, line;
  while (in >> word) {
    const std::string longer = line.empty() ? word : line + " " + word;
    if (!line.empty() && text_width(longer, font_px) > width) {
      lines.push_back(line);
      line = word;
    } else {
      line = longer;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace ascendsim::report::charts
