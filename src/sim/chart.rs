//! `--chart FILE.svg`: utilization and queue depth over time, one line per
//! ClusterQueue (or cohort), drawn with plotters' SVG backend.

use plotters::prelude::*;

use super::report::TimeSeries;

/// Why the chart could not be drawn (plotters' SVG backend writes to a string,
/// so this is a drawing error, never a file error).
#[derive(Debug, thiserror::Error)]
#[error("drawing the chart: {0}")]
pub struct ChartError(#[from] DrawingAreaErrorKind<std::io::Error>);

/// Renders the time series as an SVG document.
pub fn svg(title: &str, ts: &TimeSeries) -> Result<String, ChartError> {
    let mut out = String::new();
    draw(&mut out, title, ts)?;
    Ok(out)
}

fn draw(out: &mut String, title: &str, ts: &TimeSeries) -> Result<(), ChartError> {
    let root = SVGBackend::with_string(out, (1100, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(400);
    let secs = |t: i64| t as f64 / 1000.0;
    let x_max = ts.points.last().map_or(1.0, |p| secs(p.t_ms)).max(0.001);
    let util = |i: usize, used: i64| match ts.nominal_milli.get(i) {
        Some(&n) if n > 0 => used as f64 * 100.0 / n as f64,
        _ => 0.0,
    };
    let y_util = ts
        .points
        .iter()
        .flat_map(|p| p.used_milli.iter().enumerate().map(|(i, u)| util(i, *u)))
        .fold(100.0f64, f64::max)
        * 1.05;
    let y_pending = ts
        .points
        .iter()
        .flat_map(|p| p.pending.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.05;
    let group = if ts.grouping == "cohort" {
        "cohort"
    } else {
        "ClusterQueue"
    };

    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!(
                "{title}: {} usage, % of nominal quota per {group}",
                ts.resource
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..x_max, 0f64..y_util)?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc("% of nominal")
        .draw()?;
    for (i, name) in ts.names.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                ts.points.iter().map(|p| {
                    (
                        secs(p.t_ms),
                        util(i, p.used_milli.get(i).copied().unwrap_or(0)),
                    )
                }),
                color,
            ))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;

    let mut chart = ChartBuilder::on(&bottom)
        .caption(format!("pending workloads per {group}"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..x_max, 0f64..y_pending)?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc("pending")
        .draw()?;
    for (i, _) in ts.names.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart.draw_series(LineSeries::new(
            ts.points
                .iter()
                .map(|p| (secs(p.t_ms), p.pending.get(i).copied().unwrap_or(0) as f64)),
            color,
        ))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::report::SeriesPoint;

    #[test]
    fn draws_every_series() {
        let ts = TimeSeries {
            resource: "cpu".into(),
            grouping: "clusterQueue".into(),
            names: vec!["team-a".into(), "team-b".into()],
            nominal_milli: vec![1000, 2000],
            step_ms: 1,
            points: (0..10)
                .map(|t| SeriesPoint {
                    t_ms: t * 100,
                    used_milli: vec![t * 100, 2000 - t * 100],
                    pending: vec![t as u64, 0],
                })
                .collect(),
        };
        let s = svg("t", &ts).expect("draws");
        assert!(s.starts_with("<svg"), "{}", &s[..s.len().min(80)]);
        assert!(s.contains("team-a") && s.contains("team-b"));
        assert!(
            s.matches("<polyline").count() >= 4,
            "two panels × two series"
        );
    }
}
