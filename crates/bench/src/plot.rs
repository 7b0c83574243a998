//! A PNG of compression ratio against compression speed: one line per algorithm through its
//! levels (wring's engine), the kernel's btrfs points as triangles and zram's as squares
//! (wring's 4 KiB-page counterparts as crosses). Speed is on a log scale.
//!
//! Text needs a TrueType font; DejaVu Sans (Debian's fonts-dejavu-core) or another common one
//! is looked for. Without one the plot is still drawn, without labels, and
//! [`PlotOutcome::labels`] is false so that the caller can warn.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::report::Report;
use crate::BenchError;

/// Fonts tried, in order.
pub const FONT_CANDIDATES: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// What was drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotOutcome {
    /// The PNG written.
    pub path: PathBuf,
    /// Whether text (axes, legend) could be drawn.
    pub labels: bool,
}

/// One labelled set of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// (compression MB/s, ratio, point label).
    pub points: Vec<(f64, f64, String)>,
    /// How it is drawn.
    pub kind: SeriesKind,
    /// Colour index (same algorithm, same colour).
    pub colour: usize,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesKind {
    /// wring's engine: a line through the levels, with dots.
    EngineLine,
    /// The kernel's btrfs: triangles.
    KernelBtrfs,
    /// The kernel's zram: squares.
    KernelZram,
    /// wring on 4 KiB pages by zram's rules: crosses.
    WringPages,
}

const ALGORITHM_ORDER: [&str; 5] = ["zstd", "zlib", "lzo", "lz4", "lz4hc"];

fn colour_of(algorithm: &str) -> usize {
    ALGORITHM_ORDER
        .iter()
        .position(|a| algorithm.starts_with(a) && !(a == &"lz4" && algorithm.starts_with("lz4hc")))
        .unwrap_or(5)
}

fn palette(i: usize) -> RGBColor {
    const P: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(90, 90, 90),
    ];
    P[i % P.len()]
}

/// (level, compression MB/s, ratio, spec) of one engine row.
type LevelPoint = (i32, f64, f64, String);

/// What marks a noisy level's label on the plot.
const NOISY_MARK: &str = " noisy ±";

fn noisy_prefix(spec: &str) -> String {
    format!("{spec}{NOISY_MARK}")
}

/// A level's label: its spec, and for a noisy row how far its passes lay apart, so that a
/// curve bent by other work on the machine says so where the user looks.
fn point_label(r: &crate::levels::LevelRow) -> String {
    match r.noisy {
        true => format!("{}{:.0}%", noisy_prefix(&r.spec), r.widest_spread() * 100.0),
        false => r.spec.clone(),
    }
}

/// The series of a report: engine lines from the levels and btrfs rows, kernel and zram points.
pub fn series(report: &Report) -> Vec<Series> {
    let mut lines: BTreeMap<usize, (String, Vec<LevelPoint>)> = BTreeMap::new();
    let engine_rows = report
        .levels
        .iter()
        .chain(report.btrfs.iter().map(|r| &r.wring));
    for r in engine_rows {
        let c = colour_of(&r.algorithm);
        let entry = lines
            .entry(c)
            .or_insert_with(|| (r.algorithm.clone(), Vec::new()));
        if !entry
            .1
            .iter()
            .any(|p| p.3 == r.spec || p.3.starts_with(&noisy_prefix(&r.spec)))
        {
            entry
                .1
                .push((r.level, r.compress_mbps, r.ratio, point_label(r)));
        }
    }
    let mut out: Vec<Series> = lines
        .into_iter()
        .map(|(colour, (alg, mut pts))| {
            pts.sort_by_key(|p| p.0);
            Series {
                label: format!("wring {alg}"),
                points: pts.into_iter().map(|p| (p.1, p.2, p.3)).collect(),
                kind: SeriesKind::EngineLine,
                colour,
            }
        })
        .collect();
    let mut kernel: BTreeMap<usize, Vec<(f64, f64, String)>> = BTreeMap::new();
    for r in &report.btrfs {
        if let Some(k) = &r.kernel {
            kernel.entry(colour_of(&r.spec)).or_default().push((
                k.compress_mbps,
                k.ratio,
                r.spec.clone(),
            ));
        }
    }
    for (colour, points) in kernel {
        let alg = ALGORITHM_ORDER.get(colour).copied().unwrap_or("other");
        out.push(Series {
            label: format!("kernel btrfs {alg}"),
            points,
            kind: SeriesKind::KernelBtrfs,
            colour,
        });
    }
    for r in &report.zram {
        let colour = colour_of(&r.algorithm);
        if let Some(k) = &r.kernel {
            out.push(Series {
                label: format!("kernel zram {}", r.algorithm),
                points: vec![(k.write_mbps, k.ratio, format!("zram {}", r.algorithm))],
                kind: SeriesKind::KernelZram,
                colour,
            });
        }
        if let Some(w) = &r.wring {
            out.push(Series {
                label: format!("wring 4 KiB pages ({})", r.algorithm),
                points: vec![(w.write_mbps, w.ratio, format!("wring 4K {}", r.algorithm))],
                kind: SeriesKind::WringPages,
                colour,
            });
        }
    }
    out.retain(|s| {
        s.points
            .iter()
            .any(|p| p.0.is_finite() && p.0 > 0.0 && p.1.is_finite())
    });
    out
}

/// The first font of [`FONT_CANDIDATES`] that exists, registered with plotters once.
pub fn find_font() -> Option<&'static Path> {
    static FONT: OnceLock<Option<&'static Path>> = OnceLock::new();
    *FONT.get_or_init(|| {
        for candidate in FONT_CANDIDATES {
            let Ok(bytes) = std::fs::read(candidate) else {
                continue;
            };
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Some(Path::new(candidate));
            }
        }
        None
    })
}

/// Draw `report` into a PNG at `path` (labels when a font is found).
pub fn plot(report: &Report, path: &Path) -> Result<PlotOutcome, BenchError> {
    let labels = find_font().is_some();
    draw(report, path, labels)
}

/// Draw `report` into a PNG at `path`, with or without text.
pub fn draw(report: &Report, path: &Path, labels: bool) -> Result<PlotOutcome, BenchError> {
    let err = |e: String| BenchError::Plot {
        path: path.to_path_buf(),
        reason: e,
    };
    let all = series(report);
    let points: Vec<(f64, f64)> = all
        .iter()
        .flat_map(|s| s.points.iter().map(|p| (p.0, p.1)))
        .filter(|p| p.0.is_finite() && p.0 > 0.0 && p.1.is_finite())
        .collect();
    let (xmin, xmax) = bounds(points.iter().map(|p| p.0), 0.8, 1.25, (1.0, 1000.0));
    let (ymin, ymax) = bounds(points.iter().map(|p| p.1), 0.95, 1.05, (1.0, 4.0));
    let root = BitMapBackend::new(path, (1280, 860)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if labels {
        builder
            .caption(
                format!(
                    "wring bench {}: ratio vs compression speed — {}",
                    report.command, report.machine.cpu_model
                ),
                ("sans-serif", 22),
            )
            .x_label_area_size(50)
            .y_label_area_size(60);
    }
    // A log scale only pays when speeds span an order of magnitude.
    let log = xmax / xmin >= 10.0;
    let desc = if log {
        "compression MB/s (log scale)"
    } else {
        "compression MB/s"
    };
    if log {
        let chart = builder
            .build_cartesian_2d((xmin..xmax).log_scale(), ymin..ymax)
            .map_err(|e| err(e.to_string()))?;
        fill_chart(chart, &all, labels, desc).map_err(err)?;
    } else {
        let chart = builder
            .build_cartesian_2d(xmin..xmax, ymin..ymax)
            .map_err(|e| err(e.to_string()))?;
        fill_chart(chart, &all, labels, desc).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(PlotOutcome {
        path: path.to_path_buf(),
        labels,
    })
}

/// Mesh, series and legend on a chart whose x axis is `X`.
fn fill_chart<'a, DB, X>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    all: &[Series],
    labels: bool,
    desc: &str,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut mesh = chart.configure_mesh();
    if labels {
        mesh.x_desc(desc)
            .y_desc("ratio (4 KiB-rounded)")
            .x_labels(10)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .light_line_style(RGBColor(238, 238, 238))
            .label_style(("sans-serif", 15));
    } else {
        mesh.x_labels(0)
            .y_labels(0)
            .light_line_style(RGBColor(238, 238, 238));
    }
    mesh.draw().map_err(|e| e.to_string())?;
    for s in all {
        draw_series(&mut chart, s, labels)?;
    }
    if labels {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::LowerLeft)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn draw_series<'a, DB, X>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    s: &Series,
    labels: bool,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
{
    let colour = palette(s.colour);
    let pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter(|p| p.0.is_finite() && p.0 > 0.0 && p.1.is_finite())
        .map(|p| (p.0, p.1))
        .collect();
    let style = colour.stroke_width(2);
    let anno = match s.kind {
        SeriesKind::EngineLine => {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                .map_err(|e| e.to_string())?;
            // A ring around a noisy level's point.
            chart
                .draw_series(
                    s.points
                        .iter()
                        .filter(|p| p.2.contains(NOISY_MARK) && p.0.is_finite() && p.0 > 0.0)
                        .map(|p| Circle::new((p.0, p.1), 9, colour.stroke_width(2))),
                )
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(|e| e.to_string())?
        }
        SeriesKind::KernelBtrfs => chart
            .draw_series(
                pts.iter()
                    .map(|&p| TriangleMarker::new(p, 9, colour.filled())),
            )
            .map_err(|e| e.to_string())?,
        SeriesKind::KernelZram => chart
            .draw_series(pts.iter().map(|&p| {
                EmptyElement::at(p) + Rectangle::new([(-7, -7), (7, 7)], colour.filled())
            }))
            .map_err(|e| e.to_string())?,
        SeriesKind::WringPages => chart
            .draw_series(
                pts.iter()
                    .map(|&p| Cross::new(p, 7, colour.stroke_width(3))),
            )
            .map_err(|e| e.to_string())?,
    };
    if labels {
        let kind = s.kind;
        anno.label(s.label.clone())
            .legend(move |(x, y)| match kind {
                SeriesKind::EngineLine => {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)).into_dyn()
                }
                SeriesKind::KernelBtrfs => {
                    TriangleMarker::new((x + 10, y), 7, colour.filled()).into_dyn()
                }
                SeriesKind::KernelZram => {
                    Rectangle::new([(x + 4, y - 5), (x + 14, y + 5)], colour.filled()).into_dyn()
                }
                SeriesKind::WringPages => {
                    Cross::new((x + 10, y), 6, colour.stroke_width(3)).into_dyn()
                }
            });
        let text = ("sans-serif", 12).into_font().color(&colour);
        chart
            .draw_series(
                s.points
                    .iter()
                    .filter(|p| p.0 > 0.0 && p.1.is_finite())
                    .map(|p| {
                        EmptyElement::at((p.0, p.1))
                            + Text::new(p.2.clone(), (6, -14), text.clone())
                    }),
            )
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A range around `values` (scaled by `lo`/`hi`), or `default` when there are none.
fn bounds(values: impl Iterator<Item = f64>, lo: f64, hi: f64, default: (f64, f64)) -> (f64, f64) {
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values {
        min = min.min(v);
        max = max.max(v);
    }
    if !min.is_finite() || !max.is_finite() {
        return default;
    }
    if max <= min {
        return (min * lo, min * hi + 1e-9);
    }
    (min * lo, max * hi)
}
