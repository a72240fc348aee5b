// A small hand-written SVG line chart: panels stacked vertically, each with
// axes, "nice" ticks, labels, solid or dashed series and a legend. Enough
// for `dwell bench --thermal-sim` to draw a figure a person can read in a
// browser, without a plotting library.
//
// Thread-safety: none (a value type; build, then render).
#pragma once

#include <string>
#include <vector>

namespace dwell::cli {

struct SvgSeries {
    std::string label;  // in the legend; empty: not listed
    std::string color;  // any SVG colour
    std::vector<double> x, y;
    bool dashed = false;
};

struct SvgPanel {
    std::string title;
    std::string x_label, y_label;
    std::vector<SvgSeries> series;
    // Axis ranges; when min >= max they are taken from the data.
    double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
};

// The whole document: `panels` stacked, `width` x `panel_height` each.
std::string render_svg(const std::string& title, const std::vector<SvgPanel>& panels,
                       int width = 900, int panel_height = 340);

}  // namespace dwell::cli
