//! Plots for people, as self-contained SVG: grouped bars with error bars (base vs
//! new per row, or published vs simulated) and a heat map (per-CPU utilisation
//! over time). No plotting library: the charts are simple and the text is plain
//! SVG, which any browser shows and `resvg` rasterises.

use std::fmt::Write;

/// One bar series: a value (and optional ± error) per category; None leaves a gap.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// One value per category.
    pub values: Vec<Option<f64>>,
    /// ± error bar per category (e.g. a standard deviation).
    pub errors: Vec<Option<f64>>,
    /// Drawn as an outline (published numbers) rather than filled (simulated).
    pub hollow: bool,
}

/// Tableau-10 colours, in series order (when some series are outlined, each pair
/// of neighbours shares a colour: published and simulated).
const COLOURS: [&str; 6] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The opening of a `w` × `h` chart: white background, centred title.
fn svg_open(w: f64, h: f64, font_size: u32, title: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="DejaVu Sans, Arial, sans-serif" font-size="{font_size}">
<rect width="100%" height="100%" fill="white"/>
<text x="{:.0}" y="20" text-anchor="middle" font-size="14">{}</text>
"#,
        w / 2.0,
        esc(title)
    )
}

/// A round tick step giving about `n` ticks up to `max`.
fn tick_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 { 0 } else { (-step.log10().floor()) as usize };
    format!("{v:.decimals$}")
}

/// Legend entries laid out in rows that fit `width`: (x, row) per series.
fn legend_layout(series: &[Series], left: f64, width: f64) -> (Vec<(f64, usize)>, usize) {
    let (mut x, mut row, mut out) = (left, 0, Vec::new());
    for s in series {
        let w = 30.0 + 7.0 * s.name.chars().count() as f64;
        if x > left && x + w > width {
            x = left;
            row += 1;
        }
        out.push((x, row));
        x += w;
    }
    (out, row + 1)
}

/// Grouped bars: one group per category, one bar per series, error bars where
/// given. When all values are positive and span more than a factor of 20 the y
/// axis is logarithmic; otherwise it is linear from 0, or from below 0 when some
/// value (a %speedup, say) is negative, with bars hanging from the zero line.
pub fn bar_chart_svg(title: &str, x_label: &str, y_label: &str, categories: &[String], series: &[Series]) -> String {
    let (left, right, bottom) = (70.0, 20.0, 60.0);
    let bar_w = 14.0;
    let group_w = series.len().max(1) as f64 * bar_w + 18.0;
    let plot_w = (categories.len().max(1) as f64 * group_w).max(560.0);
    let plot_h = 300.0;
    let (legend, legend_rows) = legend_layout(series, left, left + plot_w);
    let top = 44.0 + 18.0 * legend_rows as f64;
    let (w, h) = (left + plot_w + right, top + plot_h + bottom);
    let values: Vec<f64> = series.iter().flat_map(|s| s.values.iter().flatten().copied()).filter(|v| *v > 0.0).collect();
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().zip(&s.errors).filter_map(|(v, e)| v.map(|v| v + e.unwrap_or(0.0))))
        .fold(0.0f64, f64::max);
    let min = series
        .iter()
        .flat_map(|s| s.values.iter().zip(&s.errors).filter_map(|(v, e)| v.map(|v| v - e.unwrap_or(0.0))))
        .fold(0.0f64, f64::min);
    let any_non_positive = series.iter().flat_map(|s| s.values.iter().flatten()).any(|v| *v <= 0.0);
    let min_pos = values.iter().copied().fold(f64::MAX, f64::min);
    let log = max > 0.0 && !any_non_positive && min_pos < max / 20.0;
    let span = max.max(0.0) - min;
    let step = tick_step(if span > 0.0 { span * 1.05 } else { 1.0 }, 5.0);
    let y_max = if max > 0.0 { (max * 1.05 / step).ceil().max(1.0) * step } else { 0.0 };
    let y_min = if min < 0.0 { (min * 1.05 / step).floor() * step } else { 0.0 };
    let y_max = if y_max <= y_min { y_min + step } else { y_max };
    let (lo_exp, hi_exp) = (min_pos.max(f64::MIN_POSITIVE).log10().floor(), (max * 1.05).log10().ceil());
    let y = |v: f64| {
        if log {
            let f = (v.max(10f64.powf(lo_exp)).log10() - lo_exp) / (hi_exp - lo_exp).max(1.0);
            top + plot_h - f * plot_h
        } else {
            top + plot_h - ((v - y_min) / (y_max - y_min)) * plot_h
        }
    };
    // With outlined (published) series, each is paired with the filled one after it.
    let paired = series.iter().any(|s| s.hollow);
    let colour_of = |si: usize| if paired { si / 2 } else { si };
    let mut out = svg_open(w, h, 12, title);
    // Grid and y axis: 1-2-5 per decade when logarithmic.
    let mut ticks = Vec::new();
    if log {
        let mut e = lo_exp;
        while e <= hi_exp {
            for m in [1.0, 2.0, 5.0] {
                let v = m * 10f64.powf(e);
                if v <= 10f64.powf(hi_exp) * 1.0001 {
                    ticks.push((v, fmt_tick(v, 10f64.powf(e))));
                }
            }
            e += 1.0;
        }
    } else {
        let mut k = (y_min / step).round() as i64;
        while k as f64 * step <= y_max + step / 2.0 {
            let t = k as f64 * step;
            ticks.push((t, fmt_tick(t, step)));
            k += 1;
        }
    }
    for (t, label) in ticks {
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#dddddd"/><text x="{:.0}" y="{:.1}" text-anchor="end">{label}</text>"##,
            left + plot_w,
            left - 6.0,
            y(t) + 4.0,
            yy = y(t)
        );
    }
    let _ = writeln!(
        out,
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{:.1}" stroke="black"/><line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"##,
        top + plot_h,
        y(0.0),
        left + plot_w,
        y(0.0)
    );
    let _ = writeln!(
        out,
        r#"<text x="16" y="{:.0}" text-anchor="middle" transform="rotate(-90 16 {:.0})">{}{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        esc(y_label),
        if log { ", log scale" } else { "" }
    );
    let _ =
        writeln!(out, r#"<text x="{:.0}" y="{:.0}" text-anchor="middle">{}</text>"#, left + plot_w / 2.0, h - 12.0, esc(x_label));
    // Bars.
    let gw = plot_w / categories.len().max(1) as f64;
    for (ci, cat) in categories.iter().enumerate() {
        let gx = left + ci as f64 * gw + (gw - series.len() as f64 * bar_w) / 2.0;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.0}" text-anchor="middle">{}</text>"#,
            left + (ci as f64 + 0.5) * gw,
            top + plot_h + 16.0,
            esc(cat)
        );
        for (si, s) in series.iter().enumerate() {
            let Some(v) = s.values.get(ci).copied().flatten() else { continue };
            let colour = COLOURS[colour_of(si) % COLOURS.len()];
            let x = gx + si as f64 * bar_w;
            let (fill, stroke) = if s.hollow { ("white", colour) } else { (colour, colour) };
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>"#,
                y(v).min(y(0.0)),
                bar_w - 2.0,
                (y(0.0) - y(v)).abs()
            );
            if let Some(e) = s.errors.get(ci).copied().flatten().filter(|e| *e > 0.0) {
                let cx = x + (bar_w - 2.0) / 2.0;
                let (lo, hi) = (y(if y_min < 0.0 { v - e } else { (v - e).max(0.0) }), y(v + e));
                let _ = writeln!(
                    out,
                    r#"<path d="M{cx:.1} {lo:.1} V{hi:.1} M{:.1} {hi:.1} H{:.1} M{:.1} {lo:.1} H{:.1}" stroke="black" fill="none"/>"#,
                    cx - 3.0,
                    cx + 3.0,
                    cx - 3.0,
                    cx + 3.0
                );
            }
        }
    }
    // Legend.
    for (si, s) in series.iter().enumerate() {
        let colour = COLOURS[colour_of(si) % COLOURS.len()];
        let fill = if s.hollow { "white" } else { colour };
        let (lx, row) = legend[si];
        let ly = 34.0 + 18.0 * row as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.0}" y="{ly:.0}" width="12" height="12" fill="{fill}" stroke="{colour}" stroke-width="1.5"/><text x="{:.0}" y="{:.0}">{}</text>"#,
            lx + 16.0,
            ly + 11.0,
            esc(&s.name)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// A heat map of `values[row][col]` in 0..=1 (e.g. CPU utilisation per time
/// bucket), white at 0 to dark blue at 1, rows labelled, columns `bucket_ms` wide.
pub fn heat_map_svg(title: &str, row_labels: &[String], bucket_ms: f64, values: &[Vec<f64>]) -> String {
    let cols = values.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let rows = values.len().max(1);
    let (left, top, right, bottom) = (60.0, 40.0, 90.0, 50.0);
    let cell_w = (720.0 / cols as f64).clamp(1.0, 24.0);
    let cell_h = (480.0 / rows as f64).clamp(2.0, 18.0);
    let (pw, ph) = (cols as f64 * cell_w, rows as f64 * cell_h);
    let (w, h) = (left + pw + right, top + ph + bottom);
    let shade = |v: f64| {
        let v = v.clamp(0.0, 1.0);
        let lerp = |a: f64, b: f64| (a + (b - a) * v).round() as u8;
        format!("#{:02x}{:02x}{:02x}", lerp(255.0, 8.0), lerp(255.0, 48.0), lerp(255.0, 107.0))
    };
    let mut out = svg_open(w, h, 11, title);
    let label_every = ((12.0 / cell_h).ceil() as usize).max(1);
    for (r, row) in values.iter().enumerate() {
        let yy = top + r as f64 * cell_h;
        for (c, v) in row.iter().enumerate() {
            let _ = write!(
                out,
                r#"<rect x="{:.2}" y="{yy:.2}" width="{:.2}" height="{cell_h:.2}" fill="{}"/>"#,
                left + c as f64 * cell_w,
                cell_w + 0.05,
                shade(*v)
            );
        }
        out.push('\n');
        if r % label_every == 0 {
            let label = row_labels.get(r).map_or(String::new(), |s| esc(s));
            let _ = writeln!(
                out,
                r#"<text x="{:.0}" y="{:.1}" text-anchor="end">{label}</text>"#,
                left - 6.0,
                yy + cell_h / 2.0 + 4.0
            );
        }
    }
    // Time axis: about eight labels.
    let span_ms = cols as f64 * bucket_ms;
    let step = tick_step(span_ms, 8.0);
    let mut t = 0.0;
    while t <= span_ms + 1e-9 {
        let x = left + t / bucket_ms * cell_w;
        let _ = writeln!(
            out,
            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="black"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            top + ph,
            top + ph + 4.0,
            top + ph + 16.0,
            fmt_tick(t, step)
        );
        t += step;
    }
    let _ = writeln!(out, r#"<text x="{:.0}" y="{:.0}" text-anchor="middle">time (ms)</text>"#, left + pw / 2.0, h - 10.0);
    // Colour scale.
    for i in 0..=10 {
        let v = i as f64 / 10.0;
        let yy = top + (10 - i) as f64 * 14.0;
        let _ = writeln!(
            out,
            r##"<rect x="{:.0}" y="{yy:.0}" width="14" height="14" fill="{}" stroke="#999999" stroke-width="0.5"/>"##,
            left + pw + 14.0,
            shade(v)
        );
        if i % 5 == 0 {
            let _ = writeln!(out, r#"<text x="{:.0}" y="{:.0}">{}%</text>"#, left + pw + 34.0, yy + 11.0, i * 10);
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(47.0, 5.0), 10.0);
        assert_eq!(tick_step(0.33, 5.0), 0.1);
        assert_eq!(tick_step(1800.0, 8.0), 500.0);
        assert_eq!(fmt_tick(0.2, 0.1), "0.2");
        assert_eq!(fmt_tick(20.0, 10.0), "20");
    }

    #[test]
    fn bars_are_scaled_and_labelled() {
        let series = vec![
            Series { name: "base".into(), values: vec![Some(8.0), Some(13.9)], errors: vec![Some(0.5), None], hollow: false },
            Series { name: "new & <x>".into(), values: vec![Some(5.9), None], errors: vec![None, None], hollow: true },
        ];
        let svg = bar_chart_svg("t", "groups", "seconds", &["1".into(), "2".into()], &series);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // 13.9 × 1.05 → ticks of 5 up to 15: the tallest bar is 13.9/15 of 300 px.
        assert!(svg.contains(r#"height="278.0""#), "{svg}");
        assert!(!svg.contains("log scale"));
        // Three bars (one value missing), one error bar, escaped legend text.
        assert_eq!(svg.matches("<rect x=").count(), 3 + 2);
        assert_eq!(svg.matches("<path d=").count(), 1);
        assert!(svg.contains("new &amp; &lt;x&gt;"));
    }

    #[test]
    fn negative_values_hang_from_the_zero_line() {
        // %speedup 16.2 published, −0.5 simulated: a linear axis from −5 to 20 by 5.
        let s = vec![
            Series { name: "published".into(), values: vec![Some(16.2)], errors: vec![None], hollow: true },
            Series { name: "simulated".into(), values: vec![Some(-0.5)], errors: vec![None], hollow: false },
        ];
        let svg = bar_chart_svg("t", "clients", "%speedup", &["1".into()], &s);
        assert!(!svg.contains("log scale"));
        for t in [">-5<", ">0<", ">5<", ">20<"] {
            assert!(svg.contains(t), "{t}");
        }
        // 300 px for 25 units: zero at 240 px below the top (top = 62), 16.2 is
        // 194.4 px tall, −0.5 is 6 px tall starting at the zero line.
        assert!(svg.contains(r#"y="107.6" width="12.0" height="194.4""#), "{svg}");
        assert!(svg.contains(r#"y="302.0" width="12.0" height="6.0""#), "{svg}");
    }

    #[test]
    fn a_wide_range_gets_a_log_axis() {
        let s = Series { name: "t".into(), values: vec![Some(46.4), Some(1.9)], errors: vec![None, None], hollow: false };
        let svg = bar_chart_svg("t", "threads", "seconds", &["1".into(), "80".into()], &[s]);
        assert!(svg.contains("seconds, log scale"));
        // Decades 1..100 with 1-2-5 ticks: 1, 2, 5, 10, 20, 50, 100.
        for t in [">1<", ">2<", ">5<", ">10<", ">20<", ">50<", ">100<"] {
            assert!(svg.contains(t), "{t}");
        }
    }

    #[test]
    fn heat_map_shades_from_white_to_blue() {
        let svg = heat_map_svg("util", &["cpu0".into(), "cpu1".into()], 10.0, &[vec![0.0, 1.0], vec![0.5, 0.25]]);
        assert!(svg.contains("#ffffff") && svg.contains("#08306b"));
        assert!(svg.contains(">cpu0<") && svg.contains(">cpu1<"));
    }
}
