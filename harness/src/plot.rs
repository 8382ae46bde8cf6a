//! Speedup plots as PNG and SVG (plotters, pure Rust, with the DejaVu font compiled in so that
//! no system font lookup is needed).
//!
//! What a reader of the posted chart expects to see: speedup against vCPUs per variant, the
//! ideal line, 95% confidence bars, and — because points past the host's core count measure
//! something else — oversubscribed points drawn hollow, with the core count marked. Curves on
//! virtual host time (`sweep --clock virtual`) have no oversubscribed points, and the legend
//! says which clock the curves show.

use std::path::Path;
use std::sync::Once;

use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};

use crate::stats::Estimate;

/// Default image size in pixels.
pub const WIDTH: u32 = 1024;
pub const HEIGHT: u32 = 640;

/// The y axis never goes beyond this speedup (points above it are drawn clipped at the top).
pub const MAX_SPEEDUP_AXIS: f64 = 1e6;

static FONTS: Once = Once::new();

/// Registers the bundled DejaVu Sans as plotters' `sans-serif` family.
fn register_fonts() {
    FONTS.call_once(|| {
        let _ = register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
        let _ = register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
        let _ = register_font("sans-serif", FontStyle::Italic, dejavu::sans::oblique());
        let _ = register_font("sans-serif", FontStyle::Oblique, dejavu::sans::oblique());
    });
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    Solid,
    /// Second file of a comparison.
    Dashed,
    /// The posted reference curve.
    Reference,
    /// A model's projection (`lockscale project`): dashed, hollow squares, band as bars.
    Projected,
}

#[derive(Clone, Debug)]
pub struct PlotPoint {
    pub cpus: u32,
    pub speedup: Estimate,
    pub oversubscribed: bool,
}

#[derive(Clone, Debug)]
pub struct PlotSeries {
    pub label: String,
    /// The variant, which picks the colour.
    pub variant: String,
    pub kind: LineKind,
    pub points: Vec<PlotPoint>,
    /// Whether consecutive points are joined by a line (else markers only).
    pub joined: bool,
    /// Measured on virtual host time (`--clock virtual`): no point is oversubscribed.
    pub virtual_time: bool,
}

impl PlotSeries {
    /// Whether the curve was measured (a sweep's, solid or dashed), not a reference or a
    /// projection: only measured curves have a clock.
    pub fn is_measured(&self) -> bool {
        matches!(self.kind, LineKind::Solid | LineKind::Dashed)
    }
}

/// Whether every measured curve of a plot is on virtual time (then no point is oversubscribed
/// and the host's core count means nothing for the curves).
pub fn all_virtual(series: &[PlotSeries]) -> bool {
    let mut m = series.iter().filter(|s| s.is_measured()).peekable();
    m.peek().is_some() && m.all(|s| s.virtual_time)
}

pub struct PlotOptions {
    pub title: String,
    pub y_label: String,
    pub width: u32,
    pub height: u32,
    /// Logical cores of the host, drawn as a vertical marker (not when every measured curve is
    /// on virtual time, where the host's cores do not limit the curves).
    pub host_cores: Option<u32>,
    /// Which clock the curves show (clock.rs, `caption`): a legend entry of its own.
    pub clock: Option<String>,
    pub notes: Vec<String>,
}

/// Fixed colours per strategy, so the same variant looks the same in every plot.
pub fn colour_of(variant: &str, fallback_index: usize) -> RGBColor {
    let base = variant.rsplit(':').next().unwrap_or(variant);
    match base {
        "baseline" => RGBColor(214, 39, 40),
        "per-cpu-lock" => RGBColor(31, 119, 180),
        "cputlb-no-bql" => RGBColor(44, 160, 44),
        _ => {
            const OTHERS: [RGBColor; 5] = [
                RGBColor(148, 103, 189),
                RGBColor(255, 127, 14),
                RGBColor(140, 86, 75),
                RGBColor(227, 119, 194),
                RGBColor(23, 190, 207),
            ];
            OTHERS[fallback_index % OTHERS.len()]
        }
    }
}

/// Draws the plot to `path`; the extension (`.png` or `.svg`) picks the format.
pub fn render(path: &Path, series: &[PlotSeries], opts: &PlotOptions) -> Result<()> {
    register_fonts();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("png") => {
            let root = BitMapBackend::new(path, (opts.width, opts.height)).into_drawing_area();
            draw(&root, series, opts)?;
            root.present()
                .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
        }
        Some("svg") => {
            let root = SVGBackend::new(path, (opts.width, opts.height)).into_drawing_area();
            draw(&root, series, opts)?;
            root.present()
                .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
        }
        _ => bail!("{}: plots are written as .png or .svg", path.display()),
    }
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[PlotSeries],
    opts: &PlotOptions,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing the plot: {e:?}");
    root.fill(&WHITE).map_err(err)?;
    let x_data_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.cpus))
        .max()
        .unwrap_or(1)
        .max(2);
    let y_data_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.speedup.hi.max(p.speedup.value)))
        .fold(1.0f64, f64::max);
    // Crafted or broken files can hold absurd speedups (a time of 1e-308): plotters' key-point
    // search never ends on such spans, so the axis stops at MAX_SPEEDUP_AXIS.
    let y_max = (y_data_max * 1.12).max(2.0).ceil().min(MAX_SPEEDUP_AXIS);
    let x_max = x_data_max as f64 + (x_data_max as f64 * 0.04).max(0.5);

    let notes_h = 18 * opts.notes.len() as u32;
    let (upper, lower) = root.split_vertically(opts.height.saturating_sub(notes_h));
    let mut chart = ChartBuilder::on(&upper)
        .caption(&opts.title, ("sans-serif", 22).into_font())
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("vCPUs (N)")
        .x_labels((x_max.floor() as usize + 1).min(15))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 {
                format!("{}", x.round() as i64)
            } else {
                String::new()
            }
        })
        .y_desc(opts.y_label.as_str())
        .axis_desc_style(("sans-serif", 16))
        .label_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;

    // Ideal line y = x.
    let ideal_end = x_max.min(y_max);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(1.0, 1.0), (ideal_end, ideal_end)],
            8,
            6,
            RGBColor(120, 120, 120).stroke_width(1),
        ))
        .map_err(err)?
        .label("ideal (T(1)/T(N) = N)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(120, 120, 120)));

    // Host core count, when some points lie beyond it and some curve is on host time.
    let mixed_clocks = series.iter().any(|s| s.virtual_time)
        && series
            .iter()
            .any(|s| !s.virtual_time && matches!(s.kind, LineKind::Solid | LineKind::Dashed));
    if let Some(c) = opts.host_cores
        && (c as f64) < x_data_max as f64
        && !all_virtual(series)
    {
        let xc = c as f64 + 0.5;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(xc, 0.0), (xc, y_max)],
                4,
                4,
                RGBColor(110, 110, 110).stroke_width(1),
            ))
            .map_err(err)?;
        // Label on whichever side of the line has room.
        let left_half = xc < x_max * 0.6;
        let anchor = if left_half { HPos::Left } else { HPos::Right };
        let x_text = if left_half {
            xc + x_max * 0.01
        } else {
            xc - x_max * 0.01
        };
        let style = ("sans-serif", 13)
            .into_font()
            .color(&RGBColor(110, 110, 110))
            .pos(Pos::new(anchor, VPos::Top));
        chart
            .draw_series(std::iter::once(Text::new(
                if mixed_clocks {
                    format!("host cores = {c}; hollow points oversubscribed (host-time curves)")
                } else {
                    format!("host cores = {c}; hollow points oversubscribed")
                },
                (x_text, y_max * 0.98),
                style,
            )))
            .map_err(err)?;
    }

    // Confidence bars of different series at the same N would lie on top of each other: each
    // series' bars are shifted sideways by a few pixels (the markers stay on N).
    let barred = series
        .iter()
        .filter(|s| s.kind != LineKind::Reference)
        .count();
    let dodge_step = x_max * 0.007;
    let mut barred_index = 0;
    let mut other = 0;
    for s in series {
        let idx = if crate::builder::VARIANTS.contains(&s.variant.rsplit(':').next().unwrap_or(""))
        {
            0
        } else {
            other += 1;
            other - 1
        };
        let colour = colour_of(&s.variant, idx);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|p| (p.cpus as f64, p.speedup.value))
            .collect();
        let (line_style, legend_style) = match s.kind {
            LineKind::Solid => (colour.stroke_width(2), colour.stroke_width(2)),
            LineKind::Dashed => (
                colour.mix(0.7).stroke_width(2),
                colour.mix(0.7).stroke_width(2),
            ),
            LineKind::Reference => (
                colour.mix(0.45).stroke_width(2),
                colour.mix(0.45).stroke_width(2),
            ),
            LineKind::Projected => (
                colour.mix(0.8).stroke_width(2),
                colour.mix(0.8).stroke_width(2),
            ),
        };
        let line = if s.joined { pts.clone() } else { Vec::new() };
        let anno = match s.kind {
            LineKind::Solid => chart
                .draw_series(LineSeries::new(line, line_style))
                .map_err(err)?,
            LineKind::Dashed => chart
                .draw_series(DashedLineSeries::new(line, 10, 5, line_style))
                .map_err(err)?,
            LineKind::Reference => chart
                .draw_series(DashedLineSeries::new(line, 3, 4, line_style))
                .map_err(err)?,
            LineKind::Projected => chart
                .draw_series(DashedLineSeries::new(line, 6, 6, line_style))
                .map_err(err)?,
        };
        let (kind, joined) = (s.kind, s.joined);
        anno.label(s.label.as_str()).legend(move |(x, y)| {
            let marker: DynElement<'static, _, (i32, i32)> = match kind {
                LineKind::Reference => {
                    TriangleMarker::new((x + 10, y), 4, legend_style.filled()).into_dyn()
                }
                LineKind::Projected => {
                    Rectangle::new([(x + 6, y - 4), (x + 14, y + 4)], legend_style).into_dyn()
                }
                _ => Circle::new((x + 10, y), 4, legend_style.filled()).into_dyn(),
            };
            let stroke = if joined {
                vec![(x, y), (x + 20, y)]
            } else {
                Vec::new()
            };
            EmptyElement::at((0, 0)) + PathElement::new(stroke, legend_style) + marker
        });
        if s.kind == LineKind::Reference {
            chart
                .draw_series(s.points.iter().map(|p| {
                    TriangleMarker::new(
                        (p.cpus as f64, p.speedup.value),
                        5,
                        colour.mix(0.6).filled(),
                    )
                }))
                .map_err(err)?;
            continue;
        }
        // Confidence bars.
        let dodge = (barred_index as f64 - (barred as f64 - 1.0) / 2.0) * dodge_step;
        barred_index += 1;
        let bars: Vec<f64> = s
            .points
            .iter()
            .filter(|p| p.speedup.hi > p.speedup.lo)
            .map(|p| p.cpus as f64 + dodge)
            .collect();
        let with_bars = s.points.iter().filter(|p| p.speedup.hi > p.speedup.lo);
        chart
            .draw_series(bars.iter().zip(with_bars.clone()).map(|(&x, p)| {
                PathElement::new(
                    vec![(x, p.speedup.lo), (x, p.speedup.hi)],
                    colour.stroke_width(1),
                )
            }))
            .map_err(err)?;
        for (&x, p) in bars.iter().zip(with_bars) {
            chart
                .draw_series([p.speedup.lo, p.speedup.hi].map(|y| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(-4, 0), (4, 0)], colour.stroke_width(1))
                }))
                .map_err(err)?;
        }
        if s.kind == LineKind::Projected {
            chart
                .draw_series(s.points.iter().map(|p| {
                    EmptyElement::at((p.cpus as f64, p.speedup.value))
                        + Rectangle::new([(-4, -4), (4, 4)], WHITE.filled())
                        + Rectangle::new([(-4, -4), (4, 4)], colour.stroke_width(2))
                }))
                .map_err(err)?;
            continue;
        }
        // Markers: filled within the host's cores, hollow (white inside) when oversubscribed.
        chart
            .draw_series(s.points.iter().map(|p| {
                let at = (p.cpus as f64, p.speedup.value);
                if p.oversubscribed && !s.virtual_time {
                    EmptyElement::at(at)
                        + Circle::new((0, 0), 6, WHITE.filled())
                        + Circle::new((0, 0), 6, colour.stroke_width(2))
                } else {
                    EmptyElement::at(at)
                        + Circle::new((0, 0), 5, colour.filled())
                        + Circle::new((0, 0), 5, colour.stroke_width(1))
                }
            }))
            .map_err(err)?;
    }
    // The clock the curves show, as a legend entry without a marker.
    if let Some(caption) = &opts.clock {
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(err)?
            .label(caption.as_str())
            .legend(|(x, y)| EmptyElement::at((x, y)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;

    for (i, n) in opts.notes.iter().enumerate() {
        lower
            .draw(&Text::new(
                n.clone(),
                (16, 2 + 18 * i as i32),
                ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90)),
            ))
            .map_err(err)?;
    }
    Ok(())
}
