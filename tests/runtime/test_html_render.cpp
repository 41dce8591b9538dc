// The HTML reports as a browser draws them. Headless Chromium renders a copy of each page into
// which the test injects a script (the pages themselves have none) that writes the box of every
// chart, label and bar into the DOM; --dump-dom hands them back. The same run saves a screenshot
// next to the page (kept with ASCENDSIM_KEEP_RENDERS=1, or when a check fails).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/session.h"
#include "sim/core/breakdown.h"
#include "sim/report/charts.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kChromium = "/usr/bin/chromium";
constexpr double kTolerance = 0.5;  // px: sub-pixel rounding of boxes

struct Box {
  double l = 0, t = 0, r = 0, b = 0;
  double height() const { return b - t; }
};

bool inside(const Box& in, const Box& out) {
  return in.l >= out.l - kTolerance && in.r <= out.r + kTolerance && in.t >= out.t - kTolerance &&
         in.b <= out.b + kTolerance;
}

bool overlap(const Box& a, const Box& b) {
  return a.l < b.r - kTolerance && b.l < a.r - kTolerance && a.t < b.b - kTolerance && b.t < a.b - kTolerance;
}

struct Text {
  std::string cls, text;
  Box box;
  double length = 0, font_px = 0;  ///< getComputedTextLength(), the computed font size
};

struct Bar {
  std::string title;
  Box box;
};

struct Point {
  std::string title;  ///< its tooltip ("loop-sink: 8 → 0.77 of linear")
  Box box;
};

struct Line {
  std::string stroke, dash;  ///< colour, dash pattern ("" solid)
  double width = 0;          ///< the computed stroke width, px
  Box box;
};

struct Chart {
  std::string id;
  Box box;
  std::vector<Text> texts;
  std::vector<Bar> bars;
  std::vector<Box> legend;    ///< each legend entry's swatch, label and key group
  std::vector<Point> points;  ///< plotted points (circles and markers)
  std::vector<Line> lines;    ///< plotted series (polylines)
  const Text* find(const std::string& text, const std::string& cls = "") const {
    for (const auto& t : texts)
      if (t.text == text && (cls.empty() || t.cls == cls)) return &t;
    return nullptr;
  }
};

struct Page {
  double height = 0;
  double width = 0, scroll_width = 0;  ///< the window's width and the document's
  std::vector<std::string> outside;    ///< elements reaching past the page's sides, outside any overflow box
  std::vector<std::string> clipped;    ///< elements whose content is wider than their box, outside any overflow box
  std::string header;                  ///< the text before the first <h2>
  std::string text;                    ///< the page's text, as rendered
  std::vector<Chart> charts;
  std::vector<std::pair<std::string, double>> headings;  ///< each <h2> and its top
  const Chart* chart(const std::string& id) const {
    for (const auto& c : charts)
      if (c.id == id) return &c;
    return nullptr;
  }
};

// Written into the DOM as JSON: the page's height (the body's bottom), width and scroll width,
// the elements that reach past its sides or whose content overflows them (outside a box that
// scrolls or clips), the text before the first <h2> and the whole text, every <h2>'s top, and per <svg> its box,
// every <text>'s box, length and font size, every bar's box and title, the legend's entries (a
// 12 px swatch and the label after it, or a group of class "legend"), the plotted points and lines.
const char* kMeasure = R"(<script>
(function () {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const W = document.documentElement.clientWidth;
  const out = {height: document.body.getBoundingClientRect().bottom, width: W,
               scroll_width: document.documentElement.scrollWidth, outside: [], clipped: [], header: '',
               text: document.body.innerText,
               headings: [], charts: []};
  const overflowBox = (e) => {
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement)
      if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(p).overflowX)) return p;
    return null;
  };
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (overflowBox(e)) continue;
    const what = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' "' + (e.textContent || '').slice(0, 60) + '"';
    if (r.left < -0.5 || r.right > W + 0.5) out.outside.push(what + ' [' + r.left + ', ' + r.right + ']');
    if (!(e instanceof SVGElement) && getComputedStyle(e).overflowX === 'visible' && e.scrollWidth > e.clientWidth + 1)
      out.clipped.push(what + ' content ' + e.scrollWidth + ' px in ' + e.clientWidth + ' px');
  }
  for (const e of document.body.childNodes) {
    if (e.tagName === 'H2') break;
    out.header += e.textContent + ' ';
  }
  for (const h of document.querySelectorAll('h2')) out.headings.push([h.textContent, h.getBoundingClientRect().top]);
  for (const svg of document.querySelectorAll('svg')) {
    const c = {id: svg.id, box: box(svg), texts: [], bars: [], legend: [], points: [], lines: []};
    for (const r of svg.querySelectorAll('rect'))
      if (r.getAttribute('width') === '12' && r.getAttribute('height') === '12' && !r.classList.contains('bar') &&
          !r.classList.contains('point')) {
        c.legend.push(box(r));
        if (r.nextElementSibling && r.nextElementSibling.tagName === 'text') c.legend.push(box(r.nextElementSibling));
      }
    for (const g of svg.querySelectorAll('.legend')) c.legend.push(box(g));
    for (const p of svg.querySelectorAll('circle, .point')) {
      if (p.closest('.legend')) continue;
      const title = p.querySelector('title');
      c.points.push({title: title ? title.textContent : '', box: box(p)});
    }
    for (const l of svg.querySelectorAll('polyline'))
      c.lines.push({stroke: l.getAttribute('stroke') || '', dash: l.getAttribute('stroke-dasharray') || '',
                    width: parseFloat(getComputedStyle(l).strokeWidth), box: box(l)});
    for (const t of svg.querySelectorAll('text'))
      c.texts.push({cls: t.getAttribute('class') || '', text: t.textContent, box: box(t),
                    length: t.getComputedTextLength(), font: parseFloat(getComputedStyle(t).fontSize)});
    for (const b of svg.querySelectorAll('rect.bar')) {
      const title = b.querySelector('title');
      c.bars.push({title: title ? title.textContent : '', box: box(b)});
    }
    out.charts.push(c);
  }
  const pre = document.createElement('pre');
  pre.id = 'geometry';
  pre.style.display = 'none';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>)";

Box box_of(const json& j) { return {j[0].get<double>(), j[1].get<double>(), j[2].get<double>(), j[3].get<double>()}; }

std::string unescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&nbsp;", "\u00a0"}, {"&amp;", "&"}}) {
    for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

class HtmlRender : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("ascendsim_render_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override {
    if (HasFailure() || std::getenv("ASCENDSIM_KEEP_RENDERS") != nullptr)
      std::cout << "pages and screenshots kept in " << m_dir.string() << "\n";
    else
      fs::remove_all(m_dir);
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  int run(const std::string& args) {
    const std::string cmd = std::string("ASCENDSIM_CONFIG_DIR=") + ASCENDSIM_SOURCE_DIR "/configs " + ASCENDSIM_BIN +
                            " " + args + " >" + (m_dir / "stdout").string() + " 2>" + (m_dir / "stderr").string();
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  /// The page as Chromium lays it out in a 1400 px wide window; nullopt without a browser. The
  /// screenshot is <page>.png.
  std::optional<Page> render(const fs::path& html) {
    const std::string page = slurp(html);
    EXPECT_EQ(page.find("<script"), std::string::npos) << "the report itself has no scripts";
    if (!fs::exists(kChromium)) return std::nullopt;
    const auto end = page.rfind("</body>");
    EXPECT_NE(end, std::string::npos);
    const fs::path copy = m_dir / (html.stem().string() + ".measured.html"),
                   dom = m_dir / (html.stem().string() + ".dom");
    std::ofstream(copy) << page.substr(0, end) << kMeasure << page.substr(end);
    const std::string cmd = std::string("timeout 120 ") + kChromium +
                            " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                            "--disable-background-networking --disable-component-update --disable-sync "
                            "--hide-scrollbars --window-size=1400,4000 --user-data-dir=" +
                            (m_dir / "profile").string() +
                            " --screenshot=" + (m_dir / (html.stem().string() + ".png")).string() +
                            " --dump-dom file://" + copy.string() + " >" + dom.string() + " 2>/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::string text = slurp(dom);
    const auto a = text.find("<pre id=\"geometry\"");
    if (a == std::string::npos) {
      ADD_FAILURE() << "no geometry in " << dom;
      return Page{};
    }
    const auto from = text.find('>', a) + 1;
    const json g = json::parse(unescape(text.substr(from, text.find("</pre>", from) - from)));
    Page p;
    p.height = g["height"].get<double>();
    p.width = g["width"].get<double>();
    p.scroll_width = g["scroll_width"].get<double>();
    p.outside = g["outside"].get<std::vector<std::string>>();
    p.clipped = g["clipped"].get<std::vector<std::string>>();
    p.header = g["header"].get<std::string>();
    p.text = g["text"].get<std::string>();
    for (const auto& h : g["headings"]) p.headings.emplace_back(h[0].get<std::string>(), h[1].get<double>());
    for (const auto& c : g["charts"]) {
      Chart chart{c["id"].get<std::string>(), box_of(c["box"]), {}, {}, {}, {}, {}};
      for (const auto& l : c["legend"]) chart.legend.push_back(box_of(l));
      for (const auto& q : c["points"]) chart.points.push_back({q["title"].get<std::string>(), box_of(q["box"])});
      for (const auto& l : c["lines"])
        chart.lines.push_back({l["stroke"].get<std::string>(), l["dash"].get<std::string>(), l["width"].get<double>(),
                               box_of(l["box"])});
      for (const auto& t : c["texts"])
        chart.texts.push_back({t["cls"].get<std::string>(), t["text"].get<std::string>(), box_of(t["box"]),
                               t["length"].get<double>(), t["font"].get<double>()});
      for (const auto& b : c["bars"]) chart.bars.push_back({b["title"].get<std::string>(), box_of(b["box"])});
      p.charts.push_back(std::move(chart));
    }
    return p;
  }

  fs::path m_dir;
};

#define RENDER_OR_SKIP(page, html)               \
  const std::optional<Page> page = render(html); \
  if (!page) GTEST_SKIP() << "chromium is not installed (scripts/test.sh installs it); HTML not rendered"

/// Every label of every chart lies inside its chart's box and touches no other label; the
/// charts' own estimate of a label's width is never short of the browser's.
void expect_labels_fit(const Page& page) {
  ASSERT_FALSE(page.charts.empty());
  for (const auto& c : page.charts) {
    ASSERT_FALSE(c.texts.empty()) << c.id;
    const Text* longest = &c.texts.front();
    for (const auto& t : c.texts) {
      EXPECT_TRUE(inside(t.box, c.box)) << c.id << ": \"" << t.text << "\" at [" << t.box.l << ", " << t.box.r
                                        << "] x [" << t.box.t << ", " << t.box.b << "], chart [" << c.box.l << ", "
                                        << c.box.r << "] x [" << c.box.t << ", " << c.box.b << "]";
      EXPECT_GE(ascendsim::report::charts::text_width(t.text, t.font_px) + kTolerance, t.length)
          << c.id << ": \"" << t.text << "\"";
      if (t.box.r - t.box.l > longest->box.r - longest->box.l) longest = &t;
    }
    EXPECT_TRUE(inside(longest->box, c.box)) << c.id << ": the longest label, \"" << longest->text << "\"";
    for (std::size_t i = 0; i < c.texts.size(); ++i)
      for (std::size_t j = i + 1; j < c.texts.size(); ++j)
        EXPECT_FALSE(overlap(c.texts[i].box, c.texts[j].box))
            << c.id << ": \"" << c.texts[i].text << "\" and \"" << c.texts[j].text << "\" overlap";
  }
}

/// Nothing reaches past the page's sides at 1400 px and no element's content is wider than its
/// box, unless inside a box of its own that scrolls: the document is no wider than the window.
void expect_within_page(const Page& page) {
  EXPECT_LE(page.scroll_width, page.width + kTolerance) << "the document is wider than the window";
  for (const auto& e : page.outside) ADD_FAILURE() << "past the page's side: " << e;
  for (const auto& e : page.clipped) ADD_FAILURE() << "wider than its box: " << e;
}

/// No legend entry of any chart lies on its plotted data: the box around its points and lines.
void expect_legends_clear_of_data(const Page& page) {
  for (const auto& c : page.charts) {
    if (c.points.empty() && c.lines.empty()) continue;
    Box data{INFINITY, INFINITY, -INFINITY, -INFINITY};
    auto add = [&](const Box& b) {
      data = {std::min(data.l, b.l), std::min(data.t, b.t), std::max(data.r, b.r), std::max(data.b, b.b)};
    };
    for (const auto& p : c.points) add(p.box);
    for (const auto& l : c.lines) add(l.box);
    for (const auto& k : c.legend)
      EXPECT_FALSE(overlap(k, data)) << c.id << ": a legend entry at [" << k.l << ", " << k.r << "] x [" << k.t << ", "
                                     << k.b << "] lies on the data at [" << data.l << ", " << data.r << "] x ["
                                     << data.t << ", " << data.b << "]";
  }
}

TEST(ChartText, WidthsAndCountLabels) {
  using ascendsim::report::charts::count_label;
  using ascendsim::report::charts::text_width;
  using ascendsim::report::charts::wrap;
  // Widths add up, scale with the font size, and a wide letter takes more room than a narrow one.
  EXPECT_DOUBLE_EQ(text_width("C8-nocache"), text_width("C8-") + text_width("nocache"));
  EXPECT_DOUBLE_EQ(text_width("eval", 24), 2 * text_width("eval", 12));
  EXPECT_GT(text_width("m"), 2 * text_width("i"));
  EXPECT_DOUBLE_EQ(text_width("→"), 12);  // beyond ASCII: one em
  // Compact counts: exact below 10,000, three significant digits above, never longer than 4 + suffix.
  EXPECT_EQ(count_label(0), "0");
  EXPECT_EQ(count_label(9999), "9999");
  EXPECT_EQ(count_label(270000), "270k");
  EXPECT_EQ(count_label(273750), "274k");
  EXPECT_EQ(count_label(1e6), "1M");
  EXPECT_EQ(count_label(12345678), "12.3M");
  EXPECT_EQ(count_label(999999), "1M");
  for (double v = 1; v < 1e13; v = std::round(v * 3.7)) {
    const std::string s = count_label(v);
    EXPECT_LE(s.size(), 5u) << v;
    if (v < 1e4) {
      EXPECT_EQ(s, std::to_string(static_cast<long long>(v)));
      continue;
    }
    const double scale = s.back() == 'k' ? 1e3 : s.back() == 'M' ? 1e6 : s.back() == 'G' ? 1e9 : 1e12;
    EXPECT_NEAR(std::stod(s) * scale, v, 0.005 * v) << s;  // three significant digits
  }
  // Wrapped lines keep every word, in order, each line within the width unless one word is wider.
  const std::string text = "the queue never ran empty under the device: GetNext never waited for a batch";
  const auto lines = wrap(text, 150);
  std::string joined;
  for (const auto& l : lines) {
    EXPECT_TRUE(text_width(l) <= 150 || l.find(' ') == std::string::npos) << l;
    joined += (joined.empty() ? "" : " ") + l;
  }
  EXPECT_EQ(joined, text);
  EXPECT_GT(lines.size(), 1u);
}

TEST_F(HtmlRender, CompareChartsKeepTheirLabelsInside) {
  // Two epochs of LeNet-5: op launches in the hundreds of thousands, zeros, a count of 2.
  const fs::path html = m_dir / "compare.html", report = m_dir / "compare.json";
  ASSERT_EQ(run("compare --workload lenet5 --epochs 2 --html " + html.string() + " --json " + report.string()), 0)
      << slurp(m_dir / "stderr");
  const json j = json::parse(slurp(report));
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  // The breakdown legend ends with the last phase, inside the chart.
  const Chart* breakdown = page->chart("chart-breakdown");
  ASSERT_NE(breakdown, nullptr);
  const Text* last = breakdown->find(ascendsim::sim::phase_name(ascendsim::sim::Phase::Eval));
  ASSERT_NE(last, nullptr);
  EXPECT_TRUE(inside(last->box, breakdown->box));

  // Interactions on a log axis: a zero draws no bar, only its label "0"; every other count a bar
  // whose height grows with log10(count) at one rate, the rate at which the decade ticks climb.
  const Chart* inter = page->chart("chart-interactions");
  ASSERT_NE(inter, nullptr);
  const std::vector<std::pair<std::string, std::string>> kinds = {{"op_launches", "op launches"},
                                                                  {"graph_launches", "graph launches"},
                                                                  {"h2d_copies", "H2D copies"},
                                                                  {"d2h_copies", "D2H copies"},
                                                                  {"host_syncs", "host syncs"}};
  std::map<std::string, const Bar*> bars;
  for (const auto& b : inter->bars) bars[b.title] = &b;
  std::vector<std::pair<double, double>> heights;  // (log10 count, px)
  std::size_t zeros = 0;
  for (const auto& r : j["runs"])
    for (const auto& [key, label] : kinds) {
      const auto count = r["interactions"][key].get<std::int64_t>();
      const std::string title = r["strategy"].get<std::string>() + " " + label + ": " + std::to_string(count);
      if (count == 0) {
        ++zeros;
        EXPECT_EQ(bars.count(title), 0u) << title << " draws a bar";
      } else {
        ASSERT_EQ(bars.count(title), 1u) << title;
        heights.emplace_back(std::log10(static_cast<double>(count)), bars[title]->box.height());
      }
    }
  ASSERT_GE(zeros, 4u);
  std::size_t zero_labels = 0;
  for (const auto& t : inter->texts) zero_labels += t.cls == "value" && t.text == "0";
  EXPECT_EQ(zero_labels, zeros);
  const auto [lo, hi] = std::minmax_element(heights.begin(), heights.end());
  ASSERT_GT(hi->first - lo->first, 4);  // from 2 to 274k: over five decades
  const double per_decade = (hi->second - lo->second) / (hi->first - lo->first);
  for (const auto& [lg, h] : heights) {
    EXPECT_NEAR(h, lo->second + (lg - lo->first) * per_decade, 0.6) << "log10 count " << lg;
    EXPECT_GT(h, 0.25 * per_decade);  // a count of 1 or 2 is a bar too
  }
  const Text* one = inter->find("1", "tick");
  const Text* ten = inter->find("10", "tick");
  ASSERT_TRUE(one && ten);
  EXPECT_NEAR(one->box.b - ten->box.b, per_decade, 0.6);

  // The queue-depth chart says in words, per sink strategy, whether GetNext ever found it empty,
  // and for how long.
  const Chart* depth = page->chart("chart-queue-depth");
  ASSERT_NE(depth, nullptr);
  std::string words;
  for (const auto& t : depth->texts)
    if (t.cls == "note") words += t.text + " ";
  for (const auto& r : j["runs"]) {
    const std::string name = r["strategy"];
    if (name == "non-sink") continue;
    // At most the first batch's send is waited for (data sink launches its first step soonest).
    const double waited = r["stats"]["chip"]["hostif"]["queue"]["empty_wait_s"].get<double>();
    EXPECT_LT(waited, 1e-4) << name;
    EXPECT_THAT(words, HasSubstr(waited == 0 ? name + ": the queue never ran empty"
                                             : name + ": GetNext found the queue empty and waited " +
                                                   fmt::format("{:.3g}", 1e3 * waited) + " ms"))
        << words;
  }
  // With one worker per map call and a slow resize, loop sink outruns the pipeline: the chart
  // says how long it waited.
  const fs::path starved = m_dir / "starved.html", starved_json = m_dir / "starved.json";
  ASSERT_EQ(run("compare --workload lenet5 --steps-per-epoch 200 --num-parallel-workers 1 --set host.resize_ns_per_value=40 --html " + starved.string() +
                " --json " + starved_json.string()),
            0);
  const json s = json::parse(slurp(starved_json));
  const double waited = s["runs"][3]["stats"]["chip"]["hostif"]["queue"]["empty_wait_s"].get<double>();
  ASSERT_GT(waited, 0);
  EXPECT_THAT(slurp(starved), HasSubstr("loop-sink: GetNext found the queue empty and waited " +
                                        fmt::format("{:.3g}", 1e3 * waited) + " ms"));
}

TEST_F(HtmlRender, CompareFitsALongStageNameInThePage) {
  // ResNet-50's first map call names its four ops: the execution tree's widest cell.
  const fs::path html = m_dir / "resnet.html";
  ASSERT_EQ(run("compare --workload resnet50 --steps-per-epoch 5 -q --html " + html.string()), 0)
      << slurp(m_dir / "stderr");
  const std::string stage = "Map(RandomCropDecodeResize,RandomHorizontalFlip,Normalize,HWC2CHW)";
  ASSERT_GT(ascendsim::report::charts::text_width(stage), 400);
  std::string text = slurp(html);
  for (auto at = text.find("<wbr>"); at != std::string::npos; at = text.find("<wbr>", at)) text.erase(at, 5);
  ASSERT_THAT(text, HasSubstr(">" + stage + "</td>"));
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
}

TEST_F(HtmlRender, EightDevicePageStaysShort) {
  const fs::path html = m_dir / "cluster.html";
  ASSERT_EQ(run("compare --workload lenet5 --epochs 1 --steps-per-epoch 50 --devices 8 --html " + html.string()), 0)
      << slurp(m_dir / "stderr");
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  // Small multiples: one panel per strategy, two to a row at this width, so each kind of
  // per-strategy chart (the groups' timelines, the ranks' waits) takes two rows of panels where
  // one chart per strategy in a column took four full-width charts: the Cluster section (from its
  // heading to the next) took 2,500 px that way; it must now take at most half of that.
  double cluster = -1, next = -1;
  for (const auto& [text, top] : page->headings) {
    if (cluster >= 0 && next < 0) next = top;
    if (text == "Cluster") cluster = top;
  }
  ASSERT_GE(cluster, 0);
  ASSERT_GT(next, cluster);
  EXPECT_LE(next - cluster, 1250) << "the cluster section";
  for (const char* kind : {"chart-groups-", "chart-ranks-"}) {
    const Chart* a = page->chart(std::string(kind) + "non-sink");
    const Chart* b = page->chart(std::string(kind) + "data-sink");
    const Chart* c = page->chart(std::string(kind) + "graph-sink");
    ASSERT_TRUE(a && b && c) << kind;
    EXPECT_LT(std::fabs(a->box.t - b->box.t), a->box.height()) << kind << ": side by side";  // a note may shift one
    EXPECT_GT(b->box.l, a->box.r) << kind << ": the second to the right of the first";
    EXPECT_GT(c->box.t, a->box.b) << kind << ": the next row";
    // Each rank's two waits: 8 ranks, 2 bars.
    if (std::string(kind) == "chart-ranks-") {
      EXPECT_EQ(a->bars.size(), 2u * 8);
    }
  }
  // The whole page: the one-device report (about 2,700 px with the pipeline's execution tree), the
  // time to train a cluster adds (a stacked bar and a table row per strategy, about 450 px) and
  // that section, where it was 4,750 px.
  EXPECT_LE(page->height, 2700 + 450 + 1250);
}

TEST_F(HtmlRender, CoincidingScalingCurvesEachStayVisible) {
  // ResNet-50's three sink strategies scale alike: their efficiency curves lie on one another, and
  // every curve starts at 1 on one device.
  const fs::path html = m_dir / "scaling.html";
  ASSERT_EQ(run("compare --workload resnet50 --devices 8 --scaling --steps-per-epoch 10 -q --html " + html.string()), 0)
      << slurp(m_dir / "stderr");
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  expect_legends_clear_of_data(*page);
  const Chart* c = page->chart("chart-scaling");
  ASSERT_NE(c, nullptr);
  using ascendsim::runtime::Strategy;
  // Each strategy's line by its colour, its points by their tooltips' first word; in drawing order.
  std::vector<std::string> names;
  std::map<std::string, const Line*> line;
  std::map<std::string, std::vector<const Point*>> points;
  for (const auto& l : c->lines)
    for (auto st : {Strategy::NonSink, Strategy::DataSink, Strategy::GraphSink, Strategy::LoopSink})
      if (l.stroke == ascendsim::report::charts::strategy_color(st)) {
        names.emplace_back(ascendsim::runtime::strategy_name(st));
        line[names.back()] = &l;
      }
  ASSERT_EQ(names.size(), 4u);
  for (const auto& p : c->points) points[p.title.substr(0, p.title.find(':'))].push_back(&p);
  auto centre = [](const Box& b) { return std::make_pair((b.l + b.r) / 2, (b.t + b.b) / 2); };
  auto same_spot = [&](const Point* a, const Point* b) {
    return std::fabs(centre(a->box).first - centre(b->box).first) < 2 &&
           std::fabs(centre(a->box).second - centre(b->box).second) < 2;
  };
  // Wherever two markers meet, the one drawn first shows at least 1 px all round the later one.
  std::size_t met = 0;
  for (std::size_t i = 0; i < c->points.size(); ++i)
    for (std::size_t j = i + 1; j < c->points.size(); ++j) {
      const Point *a = &c->points[i], *b = &c->points[j];
      if (a->title.substr(0, a->title.find(':')) == b->title.substr(0, b->title.find(':')) || !same_spot(a, b)) continue;
      ++met;
      EXPECT_TRUE(a->box.l <= b->box.l - 1 && a->box.r >= b->box.r + 1 && a->box.t <= b->box.t - 1 &&
                  a->box.b >= b->box.b + 1)
          << "\"" << a->title << "\" hidden under \"" << b->title << "\"";
    }
  EXPECT_GE(met, 6u);  // at least the four curves' first points
  // Curves that coincide point for point: the one drawn first is a wider line, 1 px showing on each
  // side of the next, and the legend says they coincide.
  std::string legend;
  for (const auto& t : c->texts)
    if (t.cls == "legend-note") legend += t.text + " ";
  std::size_t coinciding = 0;
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j) {
      const auto &a = points[names[i]], &b = points[names[j]];
      if (a.size() != b.size() || a.empty()) continue;
      bool all = true;
      for (std::size_t k = 0; k < a.size(); ++k) all = all && same_spot(a[k], b[k]);
      if (!all) continue;
      ++coinciding;
      EXPECT_GE(line[names[i]]->width, line[names[j]]->width + 2) << names[i] << " under " << names[j];
      EXPECT_NE(line[names[i]]->dash, line[names[j]]->dash) << names[i] << " and " << names[j];
      EXPECT_THAT(legend, HasSubstr("coincide"));
      EXPECT_THAT(legend, HasSubstr(names[i]));
      EXPECT_THAT(legend, HasSubstr(names[j]));
    }
  EXPECT_GE(coinciding, 3u);  // data sink, graph sink and loop sink, two by two
}

TEST_F(HtmlRender, ValidationShowsEveryIdWhole) {
  const fs::path html = m_dir / "validation.html", report = m_dir / "validation.json";
  ASSERT_EQ(run("validate --html " + html.string() + " --json " + report.string()), 0) << slurp(m_dir / "stderr");
  const json rows = json::parse(slurp(report));
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  const Chart* chart = page->chart("chart-validation");
  ASSERT_NE(chart, nullptr);
  std::string longest;
  for (const auto& row : rows)
    if (row["counted"].get<bool>() &&  // a bar per counted figure
        ascendsim::report::charts::text_width(row["id"]) > ascendsim::report::charts::text_width(longest))
      longest = row["id"];
  ASSERT_FALSE(longest.empty());
  const Text* label = chart->find(longest);
  ASSERT_NE(label, nullptr) << longest;
  EXPECT_TRUE(inside(label->box, chart->box)) << longest;
}

TEST_F(HtmlRender, SweepChartKeepsItsMarkInside) {
  const fs::path html = m_dir / "sweep.html";
  ASSERT_EQ(run("sweep --workload lenet5 --param sink_size --values 1,10,100,1000 --steps-per-epoch 1000 --html " +
                html.string()),
            0)
      << slurp(m_dir / "stderr");
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  const Chart* chart = page->chart("chart-sweep");
  ASSERT_NE(chart, nullptr);
  bool marked = false;
  for (const auto& t : chart->texts) marked |= t.cls == "mark-label" && t.text.rfind("break-even: ", 0) == 0;
  EXPECT_TRUE(marked);
}

TEST_F(HtmlRender, TimeToTrainPagesNameTheServerAndChip) {
  // A sweep of cluster sizes with evaluation (a bar of the time to train per size), and a training
  // run with evaluation (its time to train per strategy): each page's header names the machine.
  const fs::path sweep = m_dir / "ttt.html", sweep_json = m_dir / "ttt.json";
  ASSERT_EQ(run("sweep --workload resnet50 --server atlas800-9000 --param devices --values 8,16 --strategies loop-sink "
                "--epochs 2 --eval-every 1 --steps-per-epoch 10 -q --html " +
                sweep.string() + " --json " + sweep_json.string()),
            0)
      << slurp(m_dir / "stderr");
  const fs::path train = m_dir / "train.html";
  ASSERT_EQ(run("train --workload lenet5 --strategy loop-sink --epochs 2 --eval-every 1 --steps-per-epoch 20 "
                "--server atlas800-9000 -q --html " +
                train.string()),
            0)
      << slurp(m_dir / "stderr");
  const std::string chip = json::parse(slurp(sweep_json))["chip"];
  ASSERT_FALSE(chip.empty());
  for (const fs::path& html : {sweep, train}) {
    RENDER_OR_SKIP(page, html);
    expect_within_page(*page);
    expect_labels_fit(*page);
    ASSERT_NE(page->chart("chart-time-to-train"), nullptr) << html;
    EXPECT_THAT(page->header, HasSubstr("atlas800-9000 server")) << html;
    EXPECT_THAT(page->header, HasSubstr(chip)) << html;
  }
}

}  // namespace

namespace {

TEST_F(HtmlRender, ServingChartsKeepTheirLabelsInside) {
  const fs::path html = m_dir / "serve.html";
  ASSERT_EQ(run("serve --workload gpt --layers 2 --hidden 256 --heads 4 --ffn 1024 --vocab 2000 --requests 60 "
                "--launch all --max-seqs 32 --decode-batches 1,8,32 --rates 10,40 -q --html " +
                html.string()),
            0)
      << slurp(m_dir / "stderr");
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  EXPECT_EQ(page->charts.size(), 4u);  // the decode step by batch, the cache, two latency charts
}

TEST_F(HtmlRender, ServeSweepLegendsCoverNoPoint) {
  // At these rates each mode's last point lies high on the right, where a legend inside the plot
  // used to sit: the eager curve's ends under it on the end-to-end chart.
  const fs::path html = m_dir / "sweep.html";
  ASSERT_EQ(run("serve --workload gpt --layers 2 --hidden 256 --heads 4 --ffn 1024 --vocab 2000 --requests 60 "
                "--launch all --rates 1,4,16 -q --html " +
                html.string()),
            0)
      << slurp(m_dir / "stderr");
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  expect_legends_clear_of_data(*page);
  std::size_t latency = 0;  // the two latency charts: a point per mode and rate, a legend entry per mode
  for (const auto& c : page->charts) {
    if (c.points.size() != 3 * 3) continue;
    ++latency;
    EXPECT_FALSE(c.legend.empty());
    for (const char* mode : {"eager", "graph", "multi-step"}) EXPECT_NE(c.find(mode), nullptr) << mode;
  }
  EXPECT_EQ(latency, 2u);
}

TEST_F(HtmlRender, TuneChartHasTicksAndAFittedRange) {
  if (std::system("/usr/bin/python3 -c 'import optuna' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-optuna is not installed (scripts/test.sh installs it)";
  const fs::path html = m_dir / "tune.html", report = m_dir / "tune.json";
  ASSERT_EQ(run("tune --workload lenet5 --budget 6 --steps-per-epoch 50 -q --html " + html.string() + " --json " +
                report.string()),
            0)
      << slurp(m_dir / "stderr");
  const json j = json::parse(slurp(report));
  std::vector<double> values = {j["best"]["value"].get<double>()};
  for (const auto& t : j["trials"])
    if (!t["value"].is_null()) values.push_back(t["value"].get<double>());
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  RENDER_OR_SKIP(page, html);
  expect_within_page(*page);
  expect_labels_fit(*page);
  expect_legends_clear_of_data(*page);
  ASSERT_EQ(page->charts.size(), 1u);  // the trade-off
  const Chart* chart = &page->charts.front();
  EXPECT_EQ(chart->points.size(), values.size());
  // Both axes have tick labels: numbers a step of 1, 2 or 5 times a power of ten apart, growing
  // to the right and upwards.
  for (const char* cls : {"tick x-tick", "tick y-tick"}) {
    std::vector<std::pair<double, const Text*>> ticks;
    for (const auto& t : chart->texts)
      if (t.cls == cls) ticks.emplace_back(std::stod(t.text), &t);
    ASSERT_GE(ticks.size(), 3u) << cls;
    const double step = ticks[1].first - ticks[0].first;
    ASSERT_GT(step, 0) << cls;
    const double mantissa = step / std::pow(10, std::floor(std::log10(step) + 1e-9));
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 || std::fabs(mantissa - 5) < 1e-6)
        << cls << ": step " << step;
    for (std::size_t k = 1; k < ticks.size(); ++k) {
      EXPECT_NEAR(ticks[k].first - ticks[k - 1].first, step, 1e-6 * step) << cls;
      const Box &a = ticks[k - 1].second->box, &b = ticks[k].second->box;
      if (std::string(cls) == "tick x-tick")
        EXPECT_GT(b.l, a.r) << cls << ": " << ticks[k].second->text;
      else
        EXPECT_LT(b.b, a.t) << cls << ": " << ticks[k].second->text;
    }
    if (std::string(cls) == "tick x-tick") continue;
    // The y axis covers the values, fitted to them: it starts at 0 only where 0 lies within half
    // their spread, and the values take at least 40% of its height.
    const double bottom = ticks.front().first, top = ticks.back().first;
    EXPECT_LE(bottom, *lo);
    EXPECT_GE(top, *hi);
    ASSERT_GT(*hi, *lo);
    if (*lo > (*hi - *lo) / 2) {
      EXPECT_GT(bottom, 0) << "a y axis from 0 flattens " << *lo << " to " << *hi;
    }
    EXPECT_GE((*hi - *lo) / (top - bottom), 0.4) << "the values take " << (*hi - *lo) << " of " << (top - bottom);
    // The page states the range.
    EXPECT_THAT(page->text, HasSubstr("from " + ticks.front().second->text + " to " + ticks.back().second->text));
  }
}

}  // namespace
