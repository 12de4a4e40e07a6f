//! Synthetic paired rounds drawn from simulator profiles: the same request sent to every
//! provider after a scale-to-zero wait (so every arm is a cold start), as the reference
//! benchmark does. Output is the reference `round` format, readable by tailcut and by
//! the reference tool alike.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Write;
use tailcut_sim::SimProfile;

/// The per-attempt cap; longer arms are censored at it (`TIMEOUT`, wall = cap).
pub const CAP_S: f64 = 300.0;

fn draw(rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)) -> f64 {
    lo + (hi - lo) * rng.gen::<f64>()
}

fn seed_for(seed: u64, provider: usize, round: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (provider as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)
        ^ round.wrapping_mul(0x94D0_49BB_1331_11EB)
}

/// Writes `rounds` rounds (ids 1..=rounds, blocks of `rounds_per_block`) to `out`.
/// `progress` is called every 10,000 rounds with the count so far.
pub fn write_rounds(
    out: &mut dyn Write,
    providers: &[(String, SimProfile)],
    rounds: u64,
    seed: u64,
    rounds_per_block: u64,
    progress: &dyn Fn(u64),
) -> std::io::Result<()> {
    let mut line = String::with_capacity(512);
    for id in 1..=rounds {
        line.clear();
        let block = (id - 1) / rounds_per_block.max(1) + 1;
        line.push_str(&format!("{{\"kind\":\"round\",\"stage\":\"synth\",\"round_id\":{id},\"block\":{block},\"providers\":{{"));
        for (i, (name, profile)) in providers.iter().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed_for(seed, i, id));
            let submit = draw(&mut rng, profile.submit_latency_s);
            let fast = rng.gen::<f64>() < profile.cold_fast_p;
            let (queue, run) = if fast {
                (draw(&mut rng, profile.cold_fast_queue_s), draw(&mut rng, profile.cold_fast_run_s))
            } else {
                (draw(&mut rng, profile.cold_slow_queue_s), draw(&mut rng, profile.cold_slow_run_s))
            };
            let fails = rng.gen::<f64>() < profile.failure_p;
            let malformed = rng.gen::<f64>() < profile.malformed_p;
            let warm = draw(&mut rng, profile.warm_dispatch_s) + draw(&mut rng, profile.warm_run_s);
            let raw_wall = submit + queue + run;
            let (state, wall, valid) = if raw_wall >= CAP_S {
                ("TIMEOUT", CAP_S, false)
            } else if fails {
                ("FAILED", raw_wall, false)
            } else {
                ("COMPLETED", raw_wall, !malformed)
            };
            let wall = (wall * 100.0).round() / 100.0;
            if i > 0 {
                line.push(',');
            }
            line.push_str(&format!("\"{name}\":{{\"state\":\"{state}\",\"wall_s\":{wall},\"valid\":{valid}"));
            if valid {
                line.push_str(&format!(",\"warm_wall_s\":{:.3}", warm));
            }
            line.push_str(",\"metrics\":{");
            if profile.reports_queued {
                line.push_str(&format!("\"{name}_delay_ms\":{}", (queue * 1000.0).round() as u64));
            }
            line.push_str(&format!(
                "{}\"sim_mode\":\"{}\"}}}}",
                if profile.reports_queued { "," } else { "" },
                if fast { "cold_fast" } else { "cold_slow" }
            ));
        }
        line.push_str("}}\n");
        out.write_all(line.as_bytes())?;
        if id % 10_000 == 0 {
            progress(id);
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profiles() -> Vec<(String, SimProfile)> {
        vec![("runpod".into(), SimProfile::runpod()), ("modal".into(), SimProfile::modal()), ("cerebrium".into(), SimProfile::cerebrium())]
    }

    #[test]
    fn output_is_deterministic_valid_json_rounds() {
        let mut a = Vec::new();
        write_rounds(&mut a, &profiles(), 50, 7, 6, &|_| {}).unwrap();
        let mut b = Vec::new();
        write_rounds(&mut b, &profiles(), 50, 7, 6, &|_| {}).unwrap();
        assert_eq!(a, b);
        let text = String::from_utf8(a).unwrap();
        let recs: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(recs.len(), 50);
        assert_eq!(recs[49]["round_id"], 50);
        assert_eq!(recs[6]["block"], 2);
        assert!(recs[0]["providers"]["runpod"]["metrics"]["runpod_delay_ms"].is_u64());
        assert!(recs[0]["providers"]["modal"]["metrics"].get("modal_delay_ms").is_none());
    }

    #[test]
    fn runpod_slow_share_matches_profile() {
        let mut a = Vec::new();
        write_rounds(&mut a, &profiles(), 4000, 1, 6, &|_| {}).unwrap();
        let text = String::from_utf8(a).unwrap();
        let slow = text
            .lines()
            .filter(|l| {
                l.contains("\"runpod\":{")
                    && l.split("\"runpod\":{").nth(1).is_some_and(|s| s.contains("cold_slow") && s.find("cold_slow") < s.find("\"modal\""))
            })
            .count();
        let share = slow as f64 / 4000.0;
        assert!((share - 0.33).abs() < 0.03, "slow share {share}");
    }
}
