//! A terminal chart in the style of the posted one: framed axes with tick marks, one line
//! character and one marker letter per series, and a legend inside the lower right corner.
//!
//! Conventions: measured points are upper-case letters, oversubscribed ones (N > host cores)
//! the same letter in lower case (never on virtual host time, which says so in the legend); reference curves use digits as markers and `.` for lines.
//! Where markers of several series fall into one cell the cell shows `X` and a line under the
//! chart lists the series there, so no curve is hidden behind another.

use std::fmt::Write;

/// One curve of the chart.
#[derive(Clone, Debug)]
pub struct AsciiSeries {
    pub label: String,
    /// (N, speedup, oversubscribed).
    pub points: Vec<(f64, f64, bool)>,
    pub reference: bool,
    /// Whether consecutive points are joined by a line (else markers only).
    pub joined: bool,
}

/// The marker of a cell shared by several series.
pub const OVERLAP_MARKER: char = 'X';

/// Line character and marker of the known variants, as in the posted chart.
fn known_style(label: &str) -> Option<(char, char)> {
    // The variant is a word of the label (`posted per-cpu-lock (markers only)`, `a: baseline`).
    label.split([':', ' ']).find_map(|word| match word {
        "baseline" => Some(('*', 'B')),
        "per-cpu-lock" => Some(('#', 'D')),
        "cputlb-no-bql" => Some(('$', 'A')),
        _ => None,
    })
}

/// Styles of all series: known variants keep the posted chart's characters, others take the
/// next free pair; reference curves are dotted with digit markers — unless nothing was
/// measured, in which case they are drawn like the posted chart itself.
fn styles(series: &[AsciiSeries]) -> Vec<(char, char)> {
    const OTHERS: [(char, char); 6] = [
        ('%', 'C'),
        ('@', 'E'),
        ('&', 'F'),
        ('=', 'G'),
        ('~', 'H'),
        ('^', 'J'),
    ];
    let only_reference = series.iter().all(|s| s.reference);
    let (mut other, mut refs) = (0, 0);
    series
        .iter()
        .map(|s| {
            if s.reference && !only_reference {
                refs += 1;
                return (
                    '.',
                    char::from_digit(((refs - 1) % 9) + 1, 10).unwrap_or('o'),
                );
            }
            known_style(&s.label).unwrap_or_else(|| {
                other += 1;
                OTHERS[(other - 1) % OTHERS.len()]
            })
        })
        .collect()
}

fn nice_step(range: f64, max_ticks: usize) -> f64 {
    let raw = range / max_ticks as f64;
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 4.0, 5.0, 10.0] {
        if raw <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn fmt_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.1}")
    }
}

/// Renders the chart; `width` is the total width in characters (≥ 50); `extra_legend` lines
/// (e.g. which clock the curves show) go at the foot of the legend.
pub fn render(
    title: &str,
    series: &[AsciiSeries],
    width: usize,
    height: usize,
    extra_legend: &[String],
) -> String {
    let width = width.max(50);
    let height = height.max(12);
    let label_w = 10;
    // Columns: label_w + " " + border + inner + border.
    let inner_w = width - label_w - 3;
    let inner_h = height - 4; // title, top border, bottom border, x labels
    let all: Vec<&(f64, f64, bool)> = series.iter().flat_map(|s| s.points.iter()).collect();
    let x_data_max = all
        .iter()
        .map(|p| p.0)
        .filter(|x| x.is_finite())
        .fold(2.0f64, f64::max);
    let y_data_max = all
        .iter()
        .map(|p| p.1)
        .filter(|y| y.is_finite())
        .fold(1.0f64, f64::max)
        .min(crate::plot::MAX_SPEEDUP_AXIS);
    let y_step = nice_step(y_data_max * 1.05, 8);
    let y_max = ((y_data_max * 1.05) / y_step).ceil() * y_step;
    let x_step = nice_step(x_data_max, 8).max(1.0);
    let x_max = x_data_max + x_step * 0.6;
    let x_min = 0.0;

    // Grid of inner cells plus borders: rows 0..=inner_h+1, cols 0..=inner_w+1.
    let rows = inner_h + 2;
    let cols = inner_w + 2;
    let mut g = vec![vec![' '; cols]; rows];
    let col_of = |x: f64| -> usize {
        (((x - x_min) / (x_max - x_min)) * (cols - 1) as f64)
            .round()
            .clamp(1.0, (cols - 2) as f64) as usize
    };
    let row_of = |y: f64| -> usize {
        ((1.0 - y / y_max) * (rows - 1) as f64)
            .round()
            .clamp(1.0, (rows - 2) as f64) as usize
    };

    // Frame.
    g[0].fill('-');
    g[rows - 1].fill('-');
    for row in g.iter_mut() {
        row[0] = '|';
        row[cols - 1] = '|';
    }
    for (r, c) in [(0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1)] {
        g[r][c] = '+';
    }
    // Y ticks.
    let mut y_ticks = Vec::new();
    let mut y = 0.0;
    while y <= y_max + 1e-9 {
        let r = ((1.0 - y / y_max) * (rows - 1) as f64).round() as usize;
        y_ticks.push((r, y));
        if r > 0 && r < rows - 1 {
            g[r][0] = '|';
            g[r][1] = '-';
            g[r][2] = '+';
            g[r][cols - 3] = '+';
            g[r][cols - 2] = '-';
        }
        y += y_step;
    }
    // X ticks: 1 and multiples of the step.
    let mut x_ticks = vec![1.0];
    let mut x = x_step;
    while x <= x_data_max + 1e-9 {
        if x > 1.0 {
            x_ticks.push(x);
        }
        x += x_step;
    }
    let x_tick_cols: Vec<(usize, f64)> = x_ticks.iter().map(|&x| (col_of(x), x)).collect();
    for &(c, _) in &x_tick_cols {
        g[1][c] = '+';
        g[rows - 2][c] = '+';
    }

    // Lines, then markers on top.
    let styles = styles(series);
    for (s, &(line, _)) in series.iter().zip(&styles).filter(|(s, _)| s.joined) {
        for w in s.points.windows(2) {
            let (x0, y0, _) = w[0];
            let (x1, y1, _) = w[1];
            let steps = 4 * cols.max(rows);
            for k in 0..=steps {
                let t = k as f64 / steps as f64;
                let (r, c) = (row_of(y0 + t * (y1 - y0)), col_of(x0 + t * (x1 - x0)));
                g[r][c] = line;
            }
        }
    }
    // Markers; a cell taken by another series' marker becomes an overlap.
    // Per cell (row, column): the series whose markers fall there, as (series, N, speedup).
    type Owners = std::collections::BTreeMap<(usize, usize), Vec<(usize, f64, f64)>>;
    let mut owners = Owners::new();
    for (i, (s, &(_, marker))) in series.iter().zip(&styles).enumerate() {
        for &(x, y, over) in &s.points {
            let cell = (row_of(y), col_of(x));
            let here = owners.entry(cell).or_default();
            if !here.iter().any(|o| o.0 == i) {
                here.push((i, x, y));
            }
            g[cell.0][cell.1] = if here.len() > 1 {
                OVERLAP_MARKER
            } else if over && !s.reference {
                marker.to_ascii_lowercase()
            } else {
                marker
            };
        }
    }
    let overlaps: Vec<String> = owners
        .values()
        .filter(|o| o.len() > 1)
        .map(|o| {
            let who: Vec<String> = o
                .iter()
                .map(|&(i, _, y)| format!("{} {} {}", styles[i].1, series[i].label, fmt_num2(y)))
                .collect();
            format!(
                "{OVERLAP_MARKER} at N = {}: {}",
                fmt_num(o[0].1),
                who.join(", ")
            )
        })
        .collect();

    // Legend, bottom right inside the frame, last series on top as in the posted chart.
    let legend: Vec<String> = series
        .iter()
        .zip(&styles)
        .rev()
        .map(|(s, &(l, m))| {
            if s.joined {
                format!("{} {l}{l}{m}{l}{l} ", s.label)
            } else {
                format!("{}   {m}   ", s.label)
            }
        })
        .collect();
    let has_over = series
        .iter()
        .any(|s| !s.reference && s.points.iter().any(|p| p.2));
    let mut legend_lines = legend;
    if has_over {
        legend_lines.push("lower case: oversubscribed ".into());
    }
    if !overlaps.is_empty() {
        legend_lines.push(format!("{OVERLAP_MARKER}: several series (below) "));
    }
    legend_lines.extend(extra_legend.iter().map(|l| format!("{l} ")));
    for (i, text) in legend_lines.iter().enumerate() {
        let r = rows - 1 - legend_lines.len() + i;
        let chars: Vec<char> = text.chars().collect();
        if r == 0 || chars.len() + 2 > cols {
            continue;
        }
        let start = cols - 1 - chars.len();
        for (j, ch) in chars.into_iter().enumerate() {
            g[r][start + j] = ch;
        }
    }

    // Assemble with y labels.
    let mut out = String::new();
    let pad = (width.saturating_sub(title.chars().count())) / 2;
    let _ = writeln!(out, "{}{}", " ".repeat(pad), title);
    for (r, row) in g.iter().enumerate() {
        let label = y_ticks
            .iter()
            .find(|(tr, _)| *tr == r)
            .map(|(_, v)| fmt_num(*v))
            .unwrap_or_default();
        let line: String = row.iter().collect();
        let _ = writeln!(out, "{label:>label_w$} {}", line.trim_end());
    }
    let mut xl = vec![' '; width + 8];
    for (c, v) in x_tick_cols {
        let s = fmt_num(v);
        let center = label_w + 1 + c;
        let start = center + 1 - s.len().min(center + 1);
        for (j, ch) in s.chars().enumerate() {
            if start + j < xl.len() {
                xl[start + j] = ch;
            }
        }
    }
    let xs: String = xl.into_iter().collect();
    let _ = writeln!(out, "{}", xs.trim_end());
    let _ = writeln!(out, "{:>w$}", "vCPUs (N)", w = width / 2 + 5);
    for o in overlaps {
        let _ = writeln!(out, "{o}");
    }
    out
}

fn fmt_num2(v: f64) -> String {
    format!("{v:.2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_markers_legend_and_ticks() {
        let s = vec![
            AsciiSeries {
                label: "baseline".into(),
                points: vec![(1.0, 1.0, false), (2.0, 1.9, false), (4.0, 2.0, true)],
                reference: false,
                joined: true,
            },
            AsciiSeries {
                label: "cputlb-no-bql".into(),
                points: vec![(1.0, 1.0, false), (2.0, 1.95, false)],
                reference: false,
                joined: true,
            },
            AsciiSeries {
                label: "posted baseline".into(),
                points: vec![(1.0, 1.0, false), (4.0, 5.0, false)],
                reference: true,
                joined: true,
            },
        ];
        let out = render(
            "Speedup vs a single thread (higher is better):",
            &s,
            80,
            25,
            &[],
        );
        assert!(out.contains("baseline **B**"), "{out}");
        assert!(out.contains("cputlb-no-bql $$A$$"), "{out}");
        assert!(out.contains("posted baseline ..1.."), "{out}");
        assert!(
            out.contains('b'),
            "oversubscribed point in lower case:\n{out}"
        );
        assert!(out.contains("lower case: oversubscribed"));
        assert!(out.lines().all(|l| l.chars().count() <= 80), "{out}");
        assert!(
            out.lines().any(|l| l.trim_start().starts_with("0 +")),
            "{out}"
        );
    }

    #[test]
    fn overlapping_series_are_all_named() {
        let same = |label: &str| AsciiSeries {
            label: label.into(),
            points: vec![(1.0, 1.0, false), (2.0, 1.61, false), (4.0, 1.62, true)],
            reference: false,
            joined: true,
        };
        let out = render(
            "t",
            &[
                same("baseline"),
                same("per-cpu-lock"),
                same("cputlb-no-bql"),
            ],
            80,
            25,
            &[],
        );
        let listed: Vec<&str> = out.lines().filter(|l| l.starts_with("X at N = ")).collect();
        assert_eq!(
            listed.len(),
            3,
            "N = 1, 2 and 4 are shared by all three:\n{out}"
        );
        for l in &listed {
            for name in ["B baseline", "D per-cpu-lock", "A cputlb-no-bql"] {
                assert!(l.contains(name), "{l}");
            }
        }
        assert!(out.contains("X: several series"), "{out}");
        // Apart, nothing is marked as overlapping.
        let apart = render(
            "t",
            &[
                same("baseline"),
                AsciiSeries {
                    points: vec![(1.0, 1.0, false), (2.0, 1.9, false)],
                    ..same("per-cpu-lock")
                },
            ],
            80,
            25,
            &[],
        );
        assert_eq!(
            apart.lines().filter(|l| l.starts_with("X at N = ")).count(),
            1,
            "only N = 1 is shared:\n{apart}"
        );
    }

    #[test]
    fn unjoined_series_have_no_line() {
        let s = AsciiSeries {
            label: "posted per-cpu-lock".into(),
            points: vec![(1.0, 1.0, false), (16.0, 10.0, false)],
            reference: true,
            joined: false,
        };
        let hashes = |out: &str| out.matches('#').count();
        let apart = render("t", std::slice::from_ref(&s), 80, 25, &[]);
        let joined = render("t", &[AsciiSeries { joined: true, ..s }], 80, 25, &[]);
        assert!(
            hashes(&joined) > hashes(&apart) + 20,
            "only the joined one has a line:\n{apart}\n{joined}"
        );
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(14.0, 7), 2.0);
        assert_eq!(nice_step(28.0, 8), 4.0);
        assert_eq!(nice_step(4.0, 8), 0.5);
    }
}
