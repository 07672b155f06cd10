//! The report's plots, drawn with plotters' SVG backend into strings the page embeds: a heat
//! map (CPU by time, with its colour scale and the isolated CPUs marked), line charts
//! (interrupt rates per device, imbalance, a twin's throughput per policy) and grouped bars
//! (latency percentiles per policy). Heat map cells are a PNG raster drawn by plotters' bitmap
//! backend inside the SVG chart, which keeps a 256-CPU hour to a few hundred kilobytes.

use anyhow::{Result, anyhow};
use irqpilot_core::{CpuId, CpuSet};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;

/// Colour levels of a heat map (equal colours merge into one rectangle).
const LEVELS: f64 = 48.0;

/// Line colours, told apart in print and for common colour blindness (Okabe-Ito, then more).
const COLORS: [RGBColor; 12] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
    RGBColor(120, 94, 240),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// The `i`-th line colour.
pub fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a plot: {e:?}")
}

/// Time axis labels: seconds, or minutes past ten minutes.
pub fn time_label(span_s: f64) -> (&'static str, f64) {
    if span_s > 600.0 {
        ("time (min)", 60.0)
    } else {
        ("time (s)", 1.0)
    }
}

/// A time tick: as few decimals as tell the ticks apart (0.05 stays 0.05).
fn tick(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// 1.2k, 34M: short numbers for axes.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A heat map of `values` (per time bin ending at `times_s`, per CPU; `None`: not known),
/// CPUs upwards from the bottom, time to the right; `log`: colour by log(1 + v), for rates
/// spanning decades.
///
/// The chart (caption, axes, CPU labels, colour scale, the isolated-CPU strip) is SVG; the
/// cells are drawn by plotters' bitmap backend, one pixel per bin and CPU, and embedded as a
/// PNG image over the plotting area (scaled without smoothing): a 256-CPU hour is 77,000 cells,
/// far too many SVG elements for a page that must stay small and quick to open.
#[allow(clippy::too_many_arguments)]
pub fn heatmap(
    title: &str,
    unit: &str,
    times_s: &[f64],
    bin_s: f64,
    cpus: &[CpuId],
    values: &[Vec<Option<f64>>],
    isolated: &CpuSet,
    log: bool,
) -> Result<String> {
    let n = cpus.len().max(1);
    let bin_s = bin_s.max(1e-9);
    // Column of each bin (bins without samples stay blank).
    let column = |t: f64| ((t / bin_s).round() as usize).saturating_sub(1);
    let cols = times_s.last().map_or(1, |t| column(*t) + 1).max(1);
    let span = cols as f64 * bin_s;
    let (xdesc, xdiv) = time_label(span);
    let height = (n as u32 * 3 + 110).clamp(300, 900);
    let max = values
        .iter()
        .flatten()
        .flatten()
        .copied()
        .fold(0.0, f64::max)
        .max(1e-9);
    let scale = |v: f64| {
        let x = if log {
            (1.0 + v).ln() / (1.0 + max).ln()
        } else {
            v / max
        };
        x.clamp(0.0, 1.0)
    };
    let png = cells_png(
        cols,
        n,
        |k, j| {
            let col = times_s.get(k).map(|t| column(*t));
            (
                col,
                values
                    .get(k)
                    .and_then(|r| r.get(j))
                    .copied()
                    .flatten()
                    .map(scale),
            )
        },
        times_s.len(),
    )?;
    let mut svg = String::new();
    let image_at;
    {
        let root = SVGBackend::with_string(&mut svg, (1000, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (main, legend) = root.split_horizontally(900);
        let strip = span / xdiv / 100.0;
        let mut chart = ChartBuilder::on(&main)
            .caption(title, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(-strip..span / xdiv, 0f64..n as f64)
            .map_err(err)?;
        let cpu_label = |y: &f64| {
            let i = (y.floor() as usize).min(n - 1);
            cpus.get(i).map_or(String::new(), |c| c.0.to_string())
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .x_desc(xdesc)
            .y_desc("CPU")
            .x_label_formatter(&|x| if *x < 0.0 { String::new() } else { tick(*x) })
            .y_label_formatter(&cpu_label)
            .y_labels(n.min(16))
            .draw()
            .map_err(err)?;
        // Isolated CPUs: a strip left of the time axis.
        chart
            .draw_series(
                cpus.iter()
                    .enumerate()
                    .filter(|(_, c)| isolated.contains(**c))
                    .map(|(j, _)| {
                        Rectangle::new(
                            [(-strip, j as f64), (0.0, j as f64 + 1.0)],
                            RGBColor(204, 0, 136).filled(),
                        )
                    }),
            )
            .map_err(err)?;
        let top_left = chart.backend_coord(&(0.0, n as f64));
        let bottom_right = chart.backend_coord(&(span / xdiv, 0.0));
        image_at = (top_left, bottom_right);
        // The colour scale.
        let mut lc = ChartBuilder::on(&legend)
            .margin_top(40)
            .margin_bottom(44)
            .margin_right(8)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..1.0, 0f64..1.0)
            .map_err(err)?;
        let label = |y: &f64| {
            let v = if log {
                (1.0 + max).powf(*y) - 1.0
            } else {
                y * max
            };
            short(v)
        };
        lc.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .y_labels(6)
            .y_label_formatter(&label)
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        lc.draw_series((0..LEVELS as usize).map(|i| {
            let y0 = i as f64 / LEVELS;
            Rectangle::new(
                [(0.0, y0), (1.0, y0 + 1.0 / LEVELS)],
                ViridisRGB::get_color((i as f64 + 0.5) / LEVELS).filled(),
            )
        }))
        .map_err(err)?;
        root.present().map_err(err)?;
    }
    let ((x0, y0), (x1, y1)) = image_at;
    let image = format!(
        "<image x=\"{x0}\" y=\"{y0}\" width=\"{}\" height=\"{}\" preserveAspectRatio=\"none\" \
         style=\"image-rendering:pixelated\" href=\"data:image/png;base64,{png}\"/>\n",
        (x1 - x0).max(1),
        (y1 - y0).max(1)
    );
    match svg.rfind("</svg>") {
        Some(i) => svg.insert_str(i, &image),
        None => svg.push_str(&image),
    }
    Ok(svg)
}

/// The cells of a heat map as a base64 PNG, `cols` x `rows` pixels, row 0 at the bottom:
/// `cell(k, j)` gives the column of bin `k` and the level (0-1) of CPU `j` there (`None`:
/// unknown, white; level 0: none, light grey).
fn cells_png(
    cols: usize,
    rows: usize,
    cell: impl Fn(usize, usize) -> (Option<usize>, Option<f64>),
    bins: usize,
) -> Result<String> {
    use base64::Engine as _;
    let (w, h) = (cols.max(1), rows.max(1));
    let mut rgb = vec![255u8; w * h * 3];
    {
        let area = BitMapBackend::with_buffer(&mut rgb, (w as u32, h as u32)).into_drawing_area();
        for k in 0..bins {
            for j in 0..rows {
                let (Some(col), level) = cell(k, j) else {
                    continue;
                };
                let c = match level {
                    Some(l) if l > 0.0 => {
                        ViridisRGB::get_color((l * LEVELS).round().max(1.0) / LEVELS)
                    }
                    Some(_) => RGBColor(236, 236, 240),
                    None => continue,
                };
                let y = h - 1 - j.min(h - 1);
                area.draw_pixel((col.min(w - 1) as i32, y as i32), &c)
                    .map_err(err)?;
            }
        }
        area.present().map_err(err)?;
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w as u32, h as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        let mut wr = enc.write_header().map_err(err)?;
        wr.write_image_data(&rgb).map_err(err)?;
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A white 1000x380 chart with a caption and room for the axis labels.
fn chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, 'b>> {
    root.fill(&WHITE).map_err(err)?;
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(err)
}

/// The legend of the series drawn with labels, at `at`.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, at: SeriesLabelPosition) -> Result<()> {
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 13))
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()
        .map_err(err)
}

/// Line charts: each series a name and (x, y) points; x in seconds.
pub fn lines(
    title: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    y_floor: Option<f64>,
) -> Result<String> {
    let span = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .fold(0.0, f64::max)
        .max(1e-3);
    let (xdesc, xdiv) = time_label(span);
    let ymax = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let ymin = y_floor.unwrap_or(0.0);
    let ymax = if ymax <= ymin {
        ymin + 1.0
    } else {
        ymax * 1.08
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 380)).into_drawing_area();
        let mut chart = chart(&root, title, 0f64..span / xdiv, ymin..ymax)?;
        chart
            .configure_mesh()
            .light_line_style(RGBColor(235, 235, 235))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .x_label_formatter(&|x| tick(*x))
            .x_desc(xdesc)
            .y_desc(y_desc)
            .y_label_formatter(&|y| short(*y))
            .draw()
            .map_err(err)?;
        for (i, (name, points)) in series.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|(x, y)| (x / xdiv, *y)),
                    c.stroke_width(2),
                ))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
        }
        if series.len() > 1 || series.first().is_some_and(|(n, _)| !n.is_empty()) {
            legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Grouped bars: for each group (a percentile), one bar per series (a policy).
pub fn bars(
    title: &str,
    y_desc: &str,
    groups: &[&str],
    series: &[(String, Vec<f64>)],
) -> Result<String> {
    let ymax = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.12;
    let g = groups.len().max(1) as f64;
    let k = series.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 380)).into_drawing_area();
        let mut chart = chart(&root, title, 0f64..g, 0f64..ymax)?;
        let group_label = |x: &f64| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.26 {
                groups.get(i).map_or(String::new(), |s| (*s).to_string())
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 235))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .x_labels(groups.len() * 4 + 1)
            .x_label_formatter(&group_label)
            .y_desc(y_desc)
            .y_label_formatter(&|y| short(*y))
            .draw()
            .map_err(err)?;
        let w = 0.8 / k;
        for (s, (name, values)) in series.iter().enumerate() {
            let c = color(s);
            chart
                .draw_series(values.iter().enumerate().map(|(i, v)| {
                    let x0 = i as f64 + 0.1 + s as f64 * w;
                    Rectangle::new([(x0, 0.0), (x0 + w * 0.92, *v)], c.filled())
                }))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_svg() {
        let cpus: Vec<CpuId> = (0..4).map(CpuId).collect();
        let values: Vec<Vec<Option<f64>>> = (0..10)
            .map(|k| (0..4).map(|c| Some(f64::from(c * k))).collect())
            .collect();
        let times: Vec<f64> = (1..=10).map(f64::from).collect();
        let h = heatmap(
            "h",
            "IRQ/s",
            &times,
            1.0,
            &cpus,
            &values,
            &CpuSet::single(CpuId(3)),
            true,
        )
        .unwrap();
        assert!(h.starts_with("<svg") && h.contains("data:image/png;base64,") && h.contains("CPU"));
        let l = lines(
            "l",
            "x",
            &[("a".into(), vec![(0.0, 1.0), (2.0, 3.0)])],
            None,
        )
        .unwrap();
        assert!(l.contains("<polyline") || l.contains("<path"));
        let b = bars("b", "us", &["p50", "p99"], &[("x".into(), vec![1.0, 2.0])]).unwrap();
        assert!(b.contains("p99"));
        assert_eq!(short(1234.0), "1.2k");
        assert_eq!(
            (tick(0.05), tick(2.0), tick(0.25)),
            ("0.05".into(), "2".into(), "0.25".into())
        );
        assert_eq!(short(0.5), "0.50");
    }
}
