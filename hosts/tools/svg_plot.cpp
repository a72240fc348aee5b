#include "dwell/tools/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dwell::cli {

namespace {

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}

// A tick step of 1, 2 or 5 x 10^k giving about `want` ticks over `span`.
double nice_step(double span, int want) {
    const double raw = span / std::max(want, 1);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        if (raw <= m * mag) return m * mag;
    }
    return 10 * mag;
}

std::string tick_label(double v, double step) {
    char buf[32];
    const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v) < step * 1e-6 ? 0.0 : v);
    return buf;
}

void render_panel(std::string& out, const SvgPanel& p, double top, int width, int height) {
    // Room on the left for the tick labels and the y label, below for the x
    // ticks and label, on the right for the legend.
    const double left = 70, right = 170, pad_top = 34, pad_bottom = 50;
    const double x0 = left, x1 = width - right, y0 = top + pad_top, y1 = top + height - pad_bottom;
    double xmin = p.x_min, xmax = p.x_max, ymin = p.y_min, ymax = p.y_max;
    if (xmin >= xmax || ymin >= ymax) {
        double dxmin = 1e300, dxmax = -1e300, dymin = 1e300, dymax = -1e300;
        for (const SvgSeries& s : p.series) {
            for (double v : s.x) dxmin = std::min(dxmin, v), dxmax = std::max(dxmax, v);
            for (double v : s.y) dymin = std::min(dymin, v), dymax = std::max(dymax, v);
        }
        if (dxmin > dxmax) dxmin = 0, dxmax = 1;
        if (dymin > dymax) dymin = 0, dymax = 1;
        if (xmin >= xmax) xmin = dxmin, xmax = dxmax > dxmin ? dxmax : dxmin + 1;
        if (ymin >= ymax) {
            // Round outwards to whole ticks so the data never touches the frame.
            const double step = nice_step(std::max(dymax - dymin, 1e-9), 6);
            ymin = std::floor(dymin / step) * step;
            ymax = std::ceil(dymax / step) * step;
            if (ymax <= ymin) ymax = ymin + step;
        }
    }
    const auto sx = [&](double v) { return x0 + (v - xmin) / (xmax - xmin) * (x1 - x0); };
    const auto sy = [&](double v) { return y1 - (v - ymin) / (ymax - ymin) * (y1 - y0); };

    out += "<text x=\"" + num(x0) + "\" y=\"" + num(top + 20) +
           "\" font-size=\"15\" font-weight=\"bold\">" + escape(p.title) + "</text>\n";
    // Grid and ticks.
    const double xs = nice_step(xmax - xmin, 10), ys = nice_step(ymax - ymin, 6);
    for (double v = std::ceil(xmin / xs) * xs; v <= xmax + xs * 1e-9; v += xs) {
        out += "<line x1=\"" + num(sx(v)) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(sx(v)) +
               "\" y2=\"" + num(y1) + "\" stroke=\"#e4e4e4\"/>\n";
        out += "<text x=\"" + num(sx(v)) + "\" y=\"" + num(y1 + 18) +
               "\" font-size=\"12\" text-anchor=\"middle\">" + tick_label(v, xs) + "</text>\n";
    }
    for (double v = std::ceil(ymin / ys) * ys; v <= ymax + ys * 1e-9; v += ys) {
        out += "<line x1=\"" + num(x0) + "\" y1=\"" + num(sy(v)) + "\" x2=\"" + num(x1) +
               "\" y2=\"" + num(sy(v)) + "\" stroke=\"#e4e4e4\"/>\n";
        out += "<text x=\"" + num(x0 - 8) + "\" y=\"" + num(sy(v) + 4) +
               "\" font-size=\"12\" text-anchor=\"end\">" + tick_label(v, ys) + "</text>\n";
    }
    out += "<rect x=\"" + num(x0) + "\" y=\"" + num(y0) + "\" width=\"" + num(x1 - x0) +
           "\" height=\"" + num(y1 - y0) + "\" fill=\"none\" stroke=\"#333\"/>\n";
    out += "<text x=\"" + num((x0 + x1) / 2) + "\" y=\"" + num(y1 + 40) +
           "\" font-size=\"13\" text-anchor=\"middle\">" + escape(p.x_label) + "</text>\n";
    out += "<text transform=\"translate(" + num(x0 - 50) + "," + num((y0 + y1) / 2) +
           ") rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">" + escape(p.y_label) +
           "</text>\n";
    // The series, clipped to the plot area.
    const std::string clip = "clip" + std::to_string(static_cast<int>(top));
    out += "<clipPath id=\"" + clip + "\"><rect x=\"" + num(x0) + "\" y=\"" + num(y0) +
           "\" width=\"" + num(x1 - x0) + "\" height=\"" + num(y1 - y0) + "\"/></clipPath>\n";
    for (const SvgSeries& s : p.series) {
        out += "<polyline clip-path=\"url(#" + clip + ")\" fill=\"none\" stroke=\"" + s.color +
               "\" stroke-width=\"1.8\"" + (s.dashed ? " stroke-dasharray=\"7,5\"" : "") +
               " points=\"";
        const size_t n = std::min(s.x.size(), s.y.size());
        for (size_t i = 0; i < n; ++i) {
            out += num(sx(s.x[i])) + "," + num(sy(s.y[i])) + (i + 1 < n ? " " : "");
        }
        out += "\"/>\n";
    }
    // Legend, to the right of the plot.
    double ly = y0 + 8;
    for (const SvgSeries& s : p.series) {
        if (s.label.empty()) continue;
        out += "<line x1=\"" + num(x1 + 14) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(x1 + 44) +
               "\" y2=\"" + num(ly) + "\" stroke=\"" + s.color + "\" stroke-width=\"2\"" +
               (s.dashed ? " stroke-dasharray=\"7,5\"" : "") + "/>\n";
        out += "<text x=\"" + num(x1 + 50) + "\" y=\"" + num(ly + 4) + "\" font-size=\"12\">" +
               escape(s.label) + "</text>\n";
        ly += 20;
    }
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<SvgPanel>& panels, int width,
                       int panel_height) {
    const int head = 36;
    const int height = head + panel_height * static_cast<int>(panels.size());
    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
           "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) +
           " " + std::to_string(height) + "\" font-family=\"sans-serif\">\n";
    out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    out += "<text x=\"" + std::to_string(width / 2) +
           "\" y=\"24\" font-size=\"17\" text-anchor=\"middle\">" + escape(title) + "</text>\n";
    for (size_t i = 0; i < panels.size(); ++i) {
        render_panel(out, panels[i], head + static_cast<double>(i) * panel_height, width,
                     panel_height);
    }
    out += "</svg>\n";
    return out;
}

}  // namespace dwell::cli
