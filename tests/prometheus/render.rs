//! Draws a dashboard's panels from Prometheus' answers, laid out as Grafana lays
//! them out (24-column grid), so a person can see what the dashboard shows.

use std::net::SocketAddr;

use plotters::prelude::*;
use serde_json::Value;

/// One panel to draw: title, grid position (x, y, w, h) and (query, legend) pairs.
pub struct Panel {
    title: String,
    grid: (i64, i64, i64, i64),
    row: bool,
    targets: Vec<(String, String)>,
}

pub fn panels(d: &Value) -> Vec<Panel> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        let g = &p["gridPos"];
        let n = |k: &str| g[k].as_i64().unwrap_or(0);
        out.push(Panel {
            title: p["title"].as_str().unwrap_or_default().to_string(),
            grid: (n("x"), n("y"), n("w"), n("h")),
            row: p["type"] == "row",
            targets: p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    let mut e = t["expr"]
                        .as_str()
                        .unwrap_or_default()
                        .replace("$__rate_interval", "30s");
                    for v in ["cohort", "cluster_queue", "flavor"] {
                        e = e.replace(&format!("${v}"), ".*");
                    }
                    (
                        e,
                        t["legendFormat"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect(),
        });
    }
    out
}

/// A legend with `{{label}}` replaced by the series' labels.
fn legend(format: &str, metric: &Value) -> String {
    let mut out = format.to_string();
    if let Some(labels) = metric.as_object() {
        for (k, v) in labels {
            out = out.replace(&format!("{{{{{k}}}}}"), v.as_str().unwrap_or_default());
        }
    }
    out
}

type Series = (String, Vec<(f64, f64)>);

fn range(
    rt: &tokio::runtime::Runtime,
    prom: SocketAddr,
    expr: &str,
    secs: f64,
) -> Vec<(Value, Vec<(f64, f64)>)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let path = format!(
        "/api/v1/query_range?query={}&start={}&end={}&step=1",
        super::http::encode(expr),
        now - secs,
        now
    );
    let (_, body) = rt
        .block_on(super::http::get(prom, &path))
        .expect("query_range");
    let v: Value = serde_json::from_str(&body).expect("json");
    v["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let points = s["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    let t = p[0].as_f64()? - (now - secs);
                    let y: f64 = p[1].as_str()?.parse().ok()?;
                    y.is_finite().then_some((t, y))
                })
                .collect();
            (s["metric"].clone(), points)
        })
        .collect()
}

const COL: i32 = 70;
const ROW: i32 = 34;

pub fn svg(
    rt: &tokio::runtime::Runtime,
    prom: SocketAddr,
    panels: &[Panel],
    secs: f64,
) -> Result<String, Box<dyn std::error::Error>> {
    let height = panels
        .iter()
        .map(|p| (p.grid.1 + p.grid.3) as i32 * ROW)
        .max()
        .unwrap_or(ROW);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (24 * COL as u32, height as u32 + 10))
            .into_drawing_area();
        root.fill(&WHITE)?;
        for p in panels {
            let (x, y, w, h) = p.grid;
            let area = root.clone().shrink(
                (x as i32 * COL, y as i32 * ROW),
                (w as i32 * COL, h as i32 * ROW),
            );
            if p.row {
                area.draw_text(
                    &p.title,
                    &("sans-serif", 20).into_font().color(&BLACK),
                    (6, 8),
                )?;
                continue;
            }
            let mut series: Vec<Series> = Vec::new();
            for (expr, fmt) in &p.targets {
                for (metric, points) in range(rt, prom, expr, secs) {
                    series.push((legend(fmt, &metric), points));
                }
            }
            draw_panel(&area, &p.title, &series, secs)?;
        }
        root.present()?;
    }
    Ok(out)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    series: &[Series],
    secs: f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(22)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..secs, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .label_style(("sans-serif", 10))
        .x_labels(6)
        .y_labels(5)
        .draw()?;
    // Many series (a block and every rack) make an unreadable legend: label the largest.
    let mut order: Vec<usize> = (0..series.len()).collect();
    order.sort_by(|&a, &b| {
        let peak = |i: usize| series[i].1.iter().map(|p| p.1).fold(0.0, f64::max);
        peak(b).total_cmp(&peak(a))
    });
    for (rank, &i) in order.iter().enumerate() {
        let (name, points) = &series[i];
        let color = Palette99::pick(i).to_rgba();
        let drawn = chart.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))?;
        if rank < 6 {
            drawn.label(name.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        }
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 10))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    Ok(())
}
