//! The offload benchmark's PNG: MB/s against request size per provider.

use super::*;

/// Draw compression MB/s and p50 latency against request size, one line per provider, into a
/// PNG at `path`; whether labels could be drawn (a font was found).
pub fn plot(report: &OffloadReport, path: &Path) -> Result<bool, BenchError> {
    use plotters::prelude::*;
    let labels = crate::plot::find_font().is_some();
    let err = |e: String| BenchError::Plot {
        path: path.to_path_buf(),
        reason: e,
    };
    let mut providers: Vec<&str> = Vec::new();
    for r in &report.rows {
        if !providers.contains(&r.provider.as_str()) {
            providers.push(&r.provider);
        }
    }
    let sizes: Vec<f64> = report.rows.iter().map(|r| r.size as f64).collect();
    let (xmin, xmax) = span(&sizes, (4096.0, 1048576.0));
    let root = BitMapBackend::new(path, (1400, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let panels = root.split_evenly((1, 2));
    type Pick = fn(&OffloadRow) -> f64;
    let picks: [(&str, Pick); 2] = [
        ("compression MB/s", |r| r.compress.mbps),
        ("p50 latency per request, µs", |r| r.compress.p50_us),
    ];
    for (panel, (name, pick)) in panels.iter().zip(picks) {
        let ys: Vec<f64> = report.rows.iter().map(pick).collect();
        let (ymin, ymax) = span(&ys, (1.0, 1000.0));
        let mut builder = ChartBuilder::on(panel);
        builder.margin(20);
        if labels {
            builder
                .caption(
                    format!("{name} (sim = simulated device)"),
                    ("sans-serif", 20),
                )
                .x_label_area_size(45)
                .y_label_area_size(60);
        }
        let mut chart = builder
            .build_cartesian_2d(
                (xmin * 0.8..xmax * 1.25).log_scale(),
                (ymin * 0.8..ymax * 1.25).log_scale(),
            )
            .map_err(|e| err(e.to_string()))?;
        let mut mesh = chart.configure_mesh();
        if labels {
            mesh.x_desc("request size (log scale)")
                .y_desc(name)
                .x_label_formatter(&|x| format!("{:.0} KiB", x / 1024.0))
                .label_style(("sans-serif", 14));
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw().map_err(|e| err(e.to_string()))?;
        for (i, p) in providers.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = report
                .rows
                .iter()
                .filter(|r| r.provider == *p)
                .map(|r| (r.size as f64, pick(r)))
                .filter(|q| q.1.is_finite() && q.1 > 0.0)
                .collect();
            chart
                .draw_series(pts.iter().map(|&q| Circle::new(q, 4, colour.filled())))
                .map_err(|e| err(e.to_string()))?;
            let anno = chart
                .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?;
            if labels {
                anno.label(p.to_string()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
        }
        if labels {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| err(e.to_string()))?;
        }
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(labels)
}

/// Smallest and largest positive finite value, or `default`.
fn span(values: &[f64], default: (f64, f64)) -> (f64, f64) {
    let good = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in good {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() || hi <= 0.0 {
        return default;
    }
    if hi <= lo {
        return (lo, lo * 2.0);
    }
    (lo, hi)
}
