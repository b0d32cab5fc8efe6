//! The simulator's cluster autoscaler: how long capacity takes to come up, for Kueue's
//! ProvisioningRequest admission check and for a node pool that scales from zero.
//!
//! A scenario's AdmissionCheck run by `kueue.x-k8s.io/provisioning-request` is played by
//! the simulator: Active from the start, and Ready for each reserved workload once the
//! nodes of its request are up. The node pool behind it scales from zero: each pod's
//! node comes up after its own draw of the delay, the request is Provisioned with the
//! last, the nodes up before it idle until then, and nodes go away when their workload
//! ends. The delay is read from the check's annotation [`DELAY_ANNOTATION`]:
//! `median=4m,p90=10m` is log-normal with that median and 90th percentile; `4m` is
//! always 4 minutes; absent, 0.
//!
//! With provisioning off (`--compare provisioning=false`), the same ClusterQueues admit
//! without the check, from a static pool of their nominal GPU quota that is always up:
//! no wait, and every GPU-hour of the pool no workload uses is idle.

use std::collections::BTreeMap;

use super::rng::SplitMix64;
use crate::api::{AdmissionCheck, PROVISIONING_REQUEST_CONTROLLER};
use crate::engine::Millis;

/// The AdmissionCheck annotation giving the simulated provisioning delay.
pub const DELAY_ANNOTATION: &str = "simulator.kuota.dev/provisioning-delay";

/// z of the 90th percentile of the standard normal distribution.
const Z90: f64 = 1.281_551_565_5;

/// A provisioning delay: log-normal, or constant when `sigma` is 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delay {
    /// The median, in ms.
    pub median_ms: f64,
    /// The log-normal's σ.
    pub sigma: f64,
}

impl Delay {
    /// Parses `median=D,p90=D` or a single duration `D` (Go durations: `90s`, `4m`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let ms = |d: &str| -> Result<f64, String> {
            let d = crate::duration::parse_go_non_negative(d.trim())
                .map_err(|e| format!("{:?}: {e}", d.trim()))?;
            Ok(d.as_secs_f64() * 1000.0)
        };
        let text = text.trim();
        if !text.contains('=') {
            return Ok(Self {
                median_ms: ms(text)?,
                sigma: 0.0,
            });
        }
        let mut fields = BTreeMap::new();
        for part in text.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected key=duration"))?;
            fields.insert(k.trim().to_string(), ms(v)?);
        }
        let median = fields
            .remove("median")
            .ok_or_else(|| "median: required".to_string())?;
        let p90 = fields.remove("p90").unwrap_or(median);
        if let Some(k) = fields.keys().next() {
            return Err(format!("{k}: unknown key (expected median and p90)"));
        }
        if median <= 0.0 && p90 > 0.0 {
            return Err("median: must be more than 0 when p90 is".to_string());
        }
        if p90 < median {
            return Err("p90: must not be less than the median".to_string());
        }
        let sigma = if median > 0.0 {
            (p90 / median).ln() / Z90
        } else {
            0.0
        };
        Ok(Self {
            median_ms: median,
            sigma,
        })
    }

    /// The delay of the AdmissionCheck `ac` if the simulator plays it (its controller is
    /// the ProvisioningRequest check's); `Err` names the annotation and the problem.
    pub fn of_check(ac: &AdmissionCheck) -> Option<Result<Self, String>> {
        if ac.spec.controller_name != PROVISIONING_REQUEST_CONTROLLER {
            return None;
        }
        let text = ac.metadata.annotations.as_ref()?.get(DELAY_ANNOTATION);
        Some(text.map_or(Ok(Self::ZERO), |t| {
            Self::parse(t).map_err(|e| format!("annotation {DELAY_ANNOTATION}: {e}"))
        }))
    }

    /// No delay.
    pub const ZERO: Self = Self {
        median_ms: 0.0,
        sigma: 0.0,
    };

    /// One draw, in whole ms.
    pub(crate) fn sample(&self, rng: &mut SplitMix64) -> Millis {
        if self.sigma == 0.0 {
            return self.median_ms.round() as Millis;
        }
        // Box–Muller: one standard normal from two uniforms in (0, 1].
        let u1 = 1.0 - rng.next_f64();
        let u2 = rng.next_f64();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        (self.median_ms * (self.sigma * z).exp()).round() as Millis
    }
}

/// What provisioning cost, over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// Admissions that waited for their nodes.
    pub waits: u64,
    /// Their total wait between quota reservation and start, in ms.
    pub wait_ms: i64,
    /// GPU-hours of nodes up before their gang could start.
    pub idle_gpu_hours: f64,
}

/// How long one admission waits for its nodes, `pods` of them, each with `gpus_per_pod`
/// GPUs, coming up after a draw each: the wait is the last draw, and the nodes up
/// before it idle until then. Both are added to `tally`.
pub(crate) fn wait(
    delay: &Delay,
    pods: u32,
    gpus_per_pod: f64,
    rng: &mut SplitMix64,
    tally: &mut Tally,
) -> Millis {
    let draws: Vec<Millis> = (0..pods.max(1)).map(|_| delay.sample(rng)).collect();
    let last = draws.iter().copied().max().unwrap_or(0);
    let idle_ms: i64 = draws.iter().map(|d| last - d).sum();
    tally.idle_gpu_hours += gpus_per_pod * idle_ms as f64 / 3_600_000.0;
    tally.waits += 1;
    tally.wait_ms = tally.wait_ms.saturating_add(last);
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_parse_as_log_normal_or_constant_and_refuse_nonsense() {
        let d = Delay::parse("median=4m,p90=10m").expect("parses");
        assert_eq!(d.median_ms, 240_000.0);
        assert!((d.sigma - (2.5f64).ln() / Z90).abs() < 1e-9);
        assert_eq!(
            Delay::parse("90s").expect("constant"),
            Delay {
                median_ms: 90_000.0,
                sigma: 0.0
            }
        );
        assert_eq!(Delay::parse("p90=1m").unwrap_err(), "median: required");
        assert_eq!(
            Delay::parse("median=5m,p90=1m").unwrap_err(),
            "p90: must not be less than the median"
        );
        assert!(
            Delay::parse("median=5m,p99=9m")
                .unwrap_err()
                .starts_with("p99: unknown key")
        );
        assert!(Delay::parse("soon").is_err());
    }

    #[test]
    fn draws_have_the_stated_median_and_p90() {
        let d = Delay::parse("median=4m,p90=10m").expect("parses");
        let mut rng = SplitMix64::new(7);
        let mut draws: Vec<Millis> = (0..20_000).map(|_| d.sample(&mut rng)).collect();
        draws.sort_unstable();
        let at = |q: f64| draws[(q * draws.len() as f64) as usize] as f64;
        assert!(
            (at(0.5) / 240_000.0 - 1.0).abs() < 0.05,
            "median {}",
            at(0.5)
        );
        assert!((at(0.9) / 600_000.0 - 1.0).abs() < 0.05, "p90 {}", at(0.9));
    }

    #[test]
    fn a_gang_waits_for_its_last_node_and_the_others_idle_meanwhile() {
        let d = Delay::parse("median=4m,p90=10m").expect("parses");
        let (mut one, mut eight) = (Tally::default(), Tally::default());
        let mut rng = SplitMix64::new(1);
        for _ in 0..1000 {
            wait(&d, 1, 8.0, &mut rng, &mut one);
            wait(&d, 8, 8.0, &mut rng, &mut eight);
        }
        assert_eq!(
            one.idle_gpu_hours, 0.0,
            "a single node never waits for another"
        );
        assert!(eight.idle_gpu_hours > 0.0);
        assert!(
            eight.wait_ms > one.wait_ms,
            "the last of 8 draws is later than one"
        );
        let constant = Delay::parse("3m").expect("parses");
        let mut t = Tally::default();
        assert_eq!(wait(&constant, 4, 8.0, &mut rng, &mut t), 180_000);
        assert_eq!((t.waits, t.wait_ms, t.idle_gpu_hours), (1, 180_000, 0.0));
    }
}
