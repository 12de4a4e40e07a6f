//! MIG profiles and placement rules for A100 40/80 GB, H100 80 GB and H200 141 GB, and a
//! layout validator that says *why* an impossible layout is impossible.
//!
//! Every one of these GPUs has 7 compute slices and 8 memory slices. A profile occupies
//! `compute` compute slices and `memory` memory slices starting at one of its allowed
//! start indices (`nvidia-smi mig -lgipp`); instances may not overlap memory slices,
//! compute slices total at most 7, and at most one `+me` instance exists per GPU.

use serde::Serialize;

/// One GPU-instance profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    /// Name, e.g. `3g.40gb`.
    pub name: &'static str,
    /// Profile id (`nvidia-smi mig -lgip`), where confirmed.
    pub id: Option<u32>,
    /// Compute slices (of 7).
    pub compute: u8,
    /// Memory slices (of 8).
    pub memory: u8,
    /// Allowed start memory-slice indices.
    pub starts: &'static [u8],
    /// Most instances of this profile per GPU.
    pub max: u8,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Memory in GB, as the profile name states it.
    pub memory_gb: f64,
}

/// A MIG-capable GPU model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuModel {
    /// Key used on the command line and in config (`h100-80gb`).
    pub key: &'static str,
    /// Display name.
    pub name: &'static str,
    /// Total memory, GB.
    pub memory_gb: f64,
    /// SMs of the whole GPU.
    pub sms: u32,
    /// Profiles.
    pub profiles: Vec<Profile>,
}

const ANY1: &[u8] = &[0, 1, 2, 3, 4, 5, 6];
const EVEN: &[u8] = &[0, 2, 4, 6];
const TWO_G: &[u8] = &[0, 2, 4];
const THREE_G: &[u8] = &[0, 4];
const ZERO: &[u8] = &[0];

/// The seven profile shapes every supported GPU has, in order (`1g`, `1g+me`, `1g` with
/// two memory slices, `2g`, `3g`, `4g`, `7g`): compute slices, memory slices, allowed
/// starts and most instances per GPU.
const SHAPES: [(u8, u8, &[u8], u8); 7] =
    [(1, 1, ANY1, 7), (1, 1, ANY1, 1), (1, 2, EVEN, 4), (2, 2, TWO_G, 3), (3, 4, THREE_G, 2), (4, 4, ZERO, 1), (7, 8, ZERO, 1)];

/// Profile ids, in [`SHAPES`] order, where NVIDIA documents them for every model.
const IDS: [Option<u32>; 7] = [Some(19), Some(20), Some(15), Some(14), Some(9), Some(5), Some(0)];
/// SMs per profile, in [`SHAPES`] order, of the A100s (98 SMs in all).
const A100_SMS: [u32; 7] = [14, 14, 14, 28, 42, 56, 98];
/// SMs per profile, in [`SHAPES`] order, of the H100 and H200 (132 SMs in all).
const HOPPER_SMS: [u32; 7] = [16, 16, 26, 32, 60, 64, 132];

/// A model whose profiles, in [`SHAPES`] order, have these names, ids and SMs. A
/// profile's memory is what its name states (`3g.40gb`: 40 GB).
fn gpu(
    key: &'static str,
    name: &'static str,
    sms: u32,
    names: [&'static str; 7],
    ids: [Option<u32>; 7],
    profile_sms: [u32; 7],
) -> GpuModel {
    let profiles: Vec<Profile> = SHAPES
        .iter()
        .zip(names.into_iter().zip(ids).zip(profile_sms))
        .map(|(&(compute, memory, starts, max), ((name, id), sms))| Profile {
            name,
            id,
            compute,
            memory,
            starts,
            max,
            sms,
            memory_gb: named_gb(name),
        })
        .collect();
    let memory_gb = profiles.last().map_or(0.0, |p| p.memory_gb);
    GpuModel { key, name, memory_gb, sms, profiles }
}

/// The memory a profile name states: `1g.10gb+me` → 10.
fn named_gb(name: &str) -> f64 {
    name.split('.').nth(1).and_then(|m| m.trim_end_matches("+me").trim_end_matches("gb").parse().ok()).unwrap_or(0.0)
}

/// The supported models.
pub fn models() -> Vec<GpuModel> {
    vec![
        gpu("a100-40gb", "A100-40GB", 98, ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"], IDS, A100_SMS),
        gpu("a100-80gb", "A100-80GB", 98, ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"], IDS, A100_SMS),
        gpu(
            "h100-80gb",
            "H100-80GB",
            132,
            ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
            IDS,
            HOPPER_SMS,
        ),
        gpu(
            "h200-141gb",
            "H200-141GB",
            132,
            ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
            [Some(19), Some(20), None, Some(14), None, None, Some(0)],
            HOPPER_SMS,
        ),
    ]
}

/// A model by key (`a100-40gb`, `a100-80gb`, `h100-80gb`, `h200-141gb`).
pub fn model(key: &str) -> Result<GpuModel, MigError> {
    let k = key.to_ascii_lowercase();
    models().into_iter().find(|m| m.key == k).ok_or_else(|| MigError::UnknownModel { key: key.to_string() })
}

/// Why a layout is impossible.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MigError {
    /// Not a supported model.
    #[error("unknown GPU model `{key}` (supported: a100-40gb, a100-80gb, h100-80gb, h200-141gb)")]
    UnknownModel {
        /// The model as given.
        key: String,
    },
    /// The profile does not exist on this model.
    #[error("profile `{profile}` does not exist on {model} (profiles: {known})")]
    UnknownProfile {
        /// Profile asked for.
        profile: String,
        /// Model.
        model: String,
        /// Valid profiles.
        known: String,
    },
    /// Too many of one profile.
    #[error("{model} allows at most {max} × {profile} per GPU, the layout asks for {count}")]
    TooMany {
        /// Profile.
        profile: String,
        /// Model.
        model: String,
        /// Limit.
        max: u8,
        /// Asked.
        count: u32,
    },
    /// More than one `+me` instance.
    #[error("only one +me instance fits per GPU; the layout asks for {0}")]
    TooManyMe(u32),
    /// Compute slices exhausted.
    #[error("the layout needs {0} compute slices; every MIG GPU has 7")]
    ComputeSlices(u32),
    /// Memory slices exhausted.
    #[error("the layout needs {0} memory slices; every MIG GPU has 8")]
    MemorySlices(u32),
    /// No non-overlapping placement exists.
    #[error("no placement fits: {instances} cannot be laid out without overlapping memory slices on {model} (e.g. 2g cannot start at slice 6, 3g only at 0 or 4)")]
    NoPlacement {
        /// The instances, each with its size and possible starts.
        instances: String,
        /// The GPU model.
        model: &'static str,
    },
    /// An empty layout.
    #[error("the layout has no instances")]
    Empty,
    /// Unparseable layout text.
    #[error("cannot read layout `{text}`: expected e.g. `3g.40gb,2g.20gb,1g.10gb` or `1g.10gb=7`")]
    Syntax {
        /// The layout as given.
        text: String,
    },
}

/// An instance placed at a memory-slice start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Placed {
    /// Profile name.
    pub profile: String,
    /// First memory slice.
    pub start: u8,
    /// Memory slices used.
    pub memory: u8,
    /// Compute slices used.
    pub compute: u8,
}

/// Parses `3g.40gb,2g.20gb` or `1g.10gb=7,2g.20gb=0` into (profile, count) pairs.
pub fn parse_layout(text: &str) -> Result<Vec<(String, u32)>, MigError> {
    let mut out: Vec<(String, u32)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, count) = match part.split_once(['=', '*', 'x']) {
            Some((n, c)) if n.contains('.') => (n.trim(), c.trim().parse::<u32>().map_err(|_| MigError::Syntax { text: text.into() })?),
            _ => (part, 1),
        };
        if !name.contains('g') || !name.contains('.') {
            return Err(MigError::Syntax { text: text.into() });
        }
        match out.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => *c += count,
            None => out.push((name.to_string(), count)),
        }
    }
    Ok(out)
}

/// Checks a layout (profile counts) against the model's rules and returns one valid placement.
pub fn validate_layout(model: &GpuModel, counts: &[(String, u32)]) -> Result<Vec<Placed>, MigError> {
    let mut instances: Vec<&Profile> = Vec::new();
    let (mut compute, mut memory, mut me) = (0u32, 0u32, 0u32);
    for (name, count) in counts {
        let prof = model.profiles.iter().find(|p| p.name == name).ok_or_else(|| MigError::UnknownProfile {
            profile: name.clone(),
            model: model.name.into(),
            known: model.profiles.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        })?;
        if *count > u32::from(prof.max) {
            return Err(MigError::TooMany { profile: name.clone(), model: model.name.into(), max: prof.max, count: *count });
        }
        if name.contains("+me") {
            me += count;
        }
        compute += u32::from(prof.compute) * count;
        memory += u32::from(prof.memory) * count;
        for _ in 0..*count {
            instances.push(prof);
        }
    }
    if instances.is_empty() {
        return Err(MigError::Empty);
    }
    if me > 1 {
        return Err(MigError::TooManyMe(me));
    }
    if compute > 7 {
        return Err(MigError::ComputeSlices(compute));
    }
    if memory > 8 {
        return Err(MigError::MemorySlices(memory));
    }
    // Largest first, then the most constrained (fewest starts).
    instances.sort_by_key(|p| (std::cmp::Reverse(p.memory), p.starts.len()));
    let mut used = [false; 8];
    let mut placed = Vec::new();
    if place(&instances, &mut used, &mut placed) {
        placed.sort_by_key(|p: &Placed| p.start);
        return Ok(placed);
    }
    let detail = instances.iter().map(|p| format!("{} (size {}, starts {:?})", p.name, p.memory, p.starts)).collect::<Vec<_>>().join(" + ");
    Err(MigError::NoPlacement { instances: detail, model: model.name })
}

fn place(rest: &[&Profile], used: &mut [bool; 8], out: &mut Vec<Placed>) -> bool {
    let Some((first, tail)) = rest.split_first() else { return true };
    for &s in first.starts {
        let range = usize::from(s)..usize::from(s) + usize::from(first.memory);
        if range.end > 8 || used[range.clone()].iter().any(|u| *u) {
            continue;
        }
        used[range.clone()].iter_mut().for_each(|u| *u = true);
        out.push(Placed { profile: first.name.to_string(), start: s, memory: first.memory, compute: first.compute });
        if place(tail, used, out) {
            return true;
        }
        out.pop();
        used[range].iter_mut().for_each(|u| *u = false);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(model_key: &str, layout: &str) -> Result<Vec<Placed>, MigError> {
        validate_layout(&model(model_key).unwrap(), &parse_layout(layout).unwrap())
    }

    #[test]
    fn valid_layouts_place() {
        assert!(check("h100-80gb", "4g.40gb,3g.40gb").is_ok());
        assert!(check("h100-80gb", "1g.10gb=7").is_ok());
        assert!(check("a100-40gb", "3g.20gb,2g.10gb,1g.5gb=2").is_ok(), "all-balanced");
        let p = check("h100-80gb", "2g.20gb=3,1g.10gb").unwrap();
        assert_eq!(p.iter().find(|x| x.profile == "1g.10gb").unwrap().start, 6, "1g goes to slice 6");
        assert!(check("h200-141gb", "3g.71gb,2g.35gb,1g.18gb=2").is_ok());
        assert!(check("a100-80gb", "7g.80gb").is_ok());
    }

    #[test]
    fn impossible_layouts_say_why() {
        let e = check("h100-80gb", "3g.40gb=2,1g.10gb").unwrap_err();
        assert_eq!(e, MigError::MemorySlices(9), "3g+3g strands the 7th compute slice");
        assert!(matches!(check("h100-80gb", "2g.20gb=4").unwrap_err(), MigError::TooMany { max: 3, .. }));
        assert!(matches!(check("h100-80gb", "4g.40gb,4g.40gb").unwrap_err(), MigError::TooMany { .. }));
        assert_eq!(check("h100-80gb", "4g.40gb,2g.20gb,2g.20gb").unwrap_err(), MigError::ComputeSlices(8));
        assert!(matches!(check("a100-40gb", "3g.40gb").unwrap_err(), MigError::UnknownProfile { .. }));
        assert_eq!(
            check("h100-80gb", "1g.10gb+me,1g.10gb+me").unwrap_err(),
            MigError::TooMany { profile: "1g.10gb+me".into(), model: "H100-80GB".into(), max: 1, count: 2 }
        );
        // 3 × 1g.20gb (2 slices each, even starts) + 2g.20gb: 8 slices, 5 compute, but
        // 2g can only start at 0/2/4 and the 1g.20gb take the even starts too — fits.
        assert!(check("h100-80gb", "1g.20gb=3,2g.20gb").is_ok());
        assert_eq!(check("h100-80gb", "4g.40gb,2g.20gb,1g.20gb").unwrap().len(), 3);
        let e = check("h100-80gb", "3g.40gb,2g.20gb,1g.20gb,1g.10gb").unwrap_err();
        assert!(matches!(e, MigError::NoPlacement { .. }) || matches!(e, MigError::MemorySlices(_)), "{e}");
        assert!(matches!(model("h999"), Err(MigError::UnknownModel { .. })));
    }

    #[test]
    fn start_rules_decide_when_totals_fit() {
        // 3g.40gb (starts 0 or 4) + 2 × 2g.20gb (starts 0, 2, 4): 8 memory slices and
        // 7 compute slices; only 3g@4 with the 2g at 0 and 2 works.
        let p = check("h100-80gb", "3g.40gb,2g.20gb=2").unwrap();
        assert_eq!(p.iter().find(|x| x.profile == "3g.40gb").unwrap().start, 4);
        // 3g.40gb + 1g.20gb + 2 × 1g.10gb: the 1g.20gb must take slices 6-7 because a
        // 1g.10gb cannot start at slice 7.
        let p = check("h100-80gb", "3g.40gb,1g.20gb,1g.10gb=2").unwrap();
        assert_eq!(p.iter().find(|x| x.profile == "1g.20gb").unwrap().start, 6);
        assert_eq!(check("h100-80gb", "1g.20gb=4,1g.10gb").unwrap_err(), MigError::MemorySlices(9));
        assert_eq!(check("h100-80gb", "2g.20gb=3,1g.10gb=2").unwrap_err(), MigError::ComputeSlices(8));
    }

    #[test]
    fn parse_layout_forms() {
        assert_eq!(parse_layout("3g.40gb, 1g.10gb=2, 1g.10gb").unwrap(), vec![("3g.40gb".into(), 1), ("1g.10gb".into(), 3)]);
        assert!(parse_layout("banana").is_err());
    }
}
