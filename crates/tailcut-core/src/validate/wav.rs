//! The `wav` validator (feature `wav`): plausible speech audio, with the reference
//! tool's thresholds; and [`sine_wav`], the test tone the simulator returns.

use super::{bad_setting, reject_settings, Validation, Validator, ValidatorError, ValidatorSpec};
use crate::job::JobResult;

/// Valid when the payload is a WAV file of plausible speech: allowed channel count,
/// expected sample rate (if set), duration in bounds, not near-silent, not clipped,
/// no NaN. Thresholds default to the reference tool's.
#[derive(Debug, Clone, PartialEq)]
pub struct WavValidator {
    /// Shortest acceptable duration (inclusive), seconds.
    pub min_duration_s: f64,
    /// Longest acceptable duration (inclusive), seconds.
    pub max_duration_s: f64,
    /// Minimum RMS of the mono mix.
    pub min_rms: f64,
    /// Maximum share of samples with |x| ≥ 0.999.
    pub max_clipped_fraction: f64,
    /// Required sample rate, if any.
    pub expected_sample_rate: Option<u32>,
}

impl Default for WavValidator {
    fn default() -> Self {
        WavValidator { min_duration_s: 0.5, max_duration_s: 120.0, min_rms: 1e-4, max_clipped_fraction: 0.01, expected_sample_rate: None }
    }
}

impl WavValidator {
    pub(super) fn from_spec(spec: &ValidatorSpec) -> Result<WavValidator, ValidatorError> {
        reject_settings(spec, &["min_duration_s", "max_duration_s", "min_rms", "max_clipped_fraction", "expected_sample_rate"])?;
        let d = WavValidator::default();
        let expected_sample_rate = match spec.settings.get("expected_sample_rate") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|r| u32::try_from(r).ok())
                    .ok_or_else(|| bad_setting(spec, "expected_sample_rate", "a positive integer (Hz)"))?,
            ),
        };
        Ok(WavValidator {
            min_duration_s: f64_setting(spec, "min_duration_s", d.min_duration_s)?,
            max_duration_s: f64_setting(spec, "max_duration_s", d.max_duration_s)?,
            min_rms: f64_setting(spec, "min_rms", d.min_rms)?,
            max_clipped_fraction: f64_setting(spec, "max_clipped_fraction", d.max_clipped_fraction)?,
            expected_sample_rate,
        })
    }

    /// Judges raw WAV bytes.
    pub fn check_bytes(&self, bytes: &[u8]) -> Validation {
        if bytes.is_empty() {
            return Validation::invalid("empty result");
        }
        let Ok(reader) = hound::WavReader::new(std::io::Cursor::new(bytes)) else {
            return Validation::invalid("unparseable WAV");
        };
        let spec = reader.spec();
        let channels = usize::from(spec.channels.max(1));
        let samples: Result<Vec<f32>, _> = match spec.sample_format {
            hound::SampleFormat::Float => reader.into_samples::<f32>().collect(),
            hound::SampleFormat::Int => {
                let scale = 2f32.powi(i32::from(spec.bits_per_sample) - 1);
                reader.into_samples::<i32>().map(|s| s.map(|v| v as f32 / scale)).collect()
            }
        };
        let Ok(samples) = samples else {
            return Validation::invalid("unparseable WAV");
        };
        let mono: Vec<f64> = samples.chunks(channels).map(|c| c.iter().map(|&x| f64::from(x)).sum::<f64>() / c.len() as f64).collect();
        let has_nan = mono.iter().any(|x| x.is_nan());
        let (rms, clipped) = if has_nan || mono.is_empty() {
            (0.0, 0.0)
        } else {
            let rms = (mono.iter().map(|x| x * x).sum::<f64>() / mono.len() as f64).sqrt();
            let clipped = mono.iter().filter(|x| x.abs() >= 0.999).count() as f64 / mono.len() as f64;
            (rms, clipped)
        };
        let duration = mono.len() as f64 / f64::from(spec.sample_rate.max(1));
        let mut reasons = Vec::new();
        if has_nan {
            reasons.push("NaN samples".to_string());
        }
        if !(1..=2).contains(&spec.channels) {
            reasons.push(format!("unsupported channel count {}", spec.channels));
        }
        if let Some(rate) = self.expected_sample_rate {
            if spec.sample_rate != rate {
                reasons.push(format!("sample rate {} != expected {rate}", spec.sample_rate));
            }
        }
        if duration < self.min_duration_s || duration > self.max_duration_s {
            reasons.push(format!("duration {duration:.3}s outside [{}, {}]", self.min_duration_s, self.max_duration_s));
        }
        if rms < self.min_rms {
            reasons.push(format!("near-silent (rms {rms:.6} < {})", self.min_rms));
        }
        if clipped > self.max_clipped_fraction {
            reasons.push(format!("clipped fraction {clipped:.4} > {}", self.max_clipped_fraction));
        }
        Validation::from_reasons(reasons)
    }
}

impl Validator for WavValidator {
    fn validate(&self, result: &JobResult) -> Validation {
        match &result.payload {
            Some(p) => self.check_bytes(&p.bytes),
            None => Validation::invalid("empty result"),
        }
    }
}

/// Encodes a mono 16-bit PCM sine wave (used by the simulator and tests).
pub fn sine_wav(seconds: f64, sample_rate: u32, hz: f64, amplitude: f64) -> Vec<u8> {
    let spec = hound::WavSpec { channels: 1, sample_rate, bits_per_sample: 16, sample_format: hound::SampleFormat::Int };
    let mut cursor = std::io::Cursor::new(Vec::new());
    let n = (seconds * f64::from(sample_rate)) as usize;
    if let Ok(mut w) = hound::WavWriter::new(&mut cursor, spec) {
        for i in 0..n {
            let x = amplitude * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(sample_rate)).sin();
            let _ = w.write_sample((x * 32767.0).round() as i16);
        }
        let _ = w.finalize();
    }
    cursor.into_inner()
}

fn f64_setting(spec: &ValidatorSpec, key: &str, default: f64) -> Result<f64, ValidatorError> {
    match spec.settings.get(key) {
        None => Ok(default),
        // Finite and non-negative: a negative bound would refuse (or pass) every result.
        Some(v) => v.as_f64().filter(|x| (0.0..=1e9).contains(x)).ok_or_else(|| bad_setting(spec, key, "a number from 0 to 1e9")),
    }
}
