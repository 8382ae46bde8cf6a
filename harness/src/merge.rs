//! `lockscale merge`: combines result files of one sweep run in shares on several hosts
//! (`sweep --only I/K`), or repeated sweeps of one configuration, into one file.
//!
//! Mixing host types would put numbers from different machines on one curve, so it is refused
//! unless asked for; so are different builds of one variant, different guests, and virtual-time
//! sweeps with host-time ones (`--allow-mixed-clocks`).

use std::collections::BTreeSet;

use anyhow::{Result, bail};

use crate::model::{ResultsFile, SCHEMA_ID};
use crate::util::now_rfc3339;

pub struct MergeOptions {
    pub name: String,
    pub allow_mixed_hosts: bool,
    pub allow_mixed_builds: bool,
    /// Merge virtual-time sweeps with host-time ones (each run keeps its own clock).
    pub allow_mixed_clocks: bool,
}

pub fn merge(files: &[ResultsFile], opts: &MergeOptions) -> Result<ResultsFile> {
    let Some(first) = files.first() else {
        bail!("nothing to merge")
    };
    for f in files {
        if f.schema != SCHEMA_ID {
            bail!(
                "{} has schema {:?}; this lockscale reads {SCHEMA_ID}",
                f.name,
                f.schema
            );
        }
    }
    // The same runs twice (a file given twice, or merged into an earlier merge) would count
    // every repetition twice.
    let mut ids = BTreeSet::new();
    for f in files {
        for r in &f.runs {
            if !ids.insert((
                r.variant.as_str(),
                r.cpus,
                r.rep,
                r.seq,
                r.started.as_str(),
                r.guest_elapsed_s.map(f64::to_bits),
            )) {
                bail!(
                    "{} holds a run already present ({} N={} rep {} started {}): the same results given twice?",
                    f.name,
                    r.variant,
                    r.cpus,
                    r.rep,
                    r.started
                );
            }
        }
    }
    let mut out = first.clone();
    out.name = opts.name.clone();
    out.updated = now_rfc3339();
    out.config.share = None;
    out.merged_from = files.iter().map(|f| f.name.clone()).collect();
    // A file that is itself a merge contributes its own hosts.
    out.hosts = files
        .iter()
        .flat_map(|f| {
            if f.hosts.is_empty() {
                vec![f.host.clone()]
            } else {
                f.hosts.clone()
            }
        })
        .collect();
    for f in &files[1..] {
        crate::compare::check_comparable(first, f)?;
        crate::clock::check_mix(first, f, opts.allow_mixed_clocks)?;
        if first.workload.image_sha256 != f.workload.image_sha256 {
            bail!("{} and {} ran different guest images", first.name, f.name);
        }
        if !crate::host::same_type(&first.host, &f.host) && !opts.allow_mixed_hosts {
            bail!(
                "{} ran on a different host type ({}) than {} ({}); pass --allow-mixed-hosts to merge anyway",
                f.name,
                crate::host::describe(&f.host),
                first.name,
                crate::host::describe(&first.host)
            );
        }
        for (v, b) in &f.builds {
            match out.builds.get(v) {
                None => {
                    out.builds.insert(v.clone(), b.clone());
                }
                Some(a) => {
                    let same = match (&a.git_rev, &b.git_rev) {
                        (Some(x), Some(y)) => {
                            x == y && a.features == b.features && a.git_dirty == b.git_dirty
                        }
                        _ => a.binary_sha256 == b.binary_sha256,
                    };
                    if !same && !opts.allow_mixed_builds {
                        bail!(
                            "{v} was built differently in {} and {}; pass --allow-mixed-builds to merge anyway",
                            first.name,
                            f.name
                        );
                    }
                }
            }
        }
        if out.workload.expected_checksum.is_none() {
            out.workload.expected_checksum = f.workload.expected_checksum.clone();
        }
        for v in &f.config.variants {
            if !out.config.variants.contains(v) {
                out.config.variants.push(v.clone());
            }
        }
        out.config.cpus.extend(f.config.cpus.iter().copied());
        out.config.reps = out.config.reps.max(f.config.reps);
        out.config.timeout_s = out.config.timeout_s.max(f.config.timeout_s);
        if out.config.mode != f.config.mode {
            out.config.mode = crate::sizes::Mode::Custom;
        }
        if f.created < out.created {
            out.created = f.created.clone();
        }
        out.host.load_after = f.host.load_after.or(out.host.load_after);
        out.runs.extend(f.runs.iter().cloned());
    }
    out.config.cpus.sort_unstable();
    out.config.cpus.dedup();
    // Shares of one sweep never overlap; repeated sweeps do, and then the later file's
    // repetitions are numbered after the earlier ones.
    let mut seen = BTreeSet::new();
    let mut renumbered = 0;
    for i in 0..out.runs.len() {
        let (v, n, rep) = (
            out.runs[i].variant.clone(),
            out.runs[i].cpus,
            out.runs[i].rep,
        );
        if seen.contains(&(v.clone(), n, rep)) {
            let next = seen
                .iter()
                .filter(|(a, b, _)| *a == v && *b == n)
                .map(|k| k.2)
                .max()
                .unwrap_or(0)
                + 1;
            out.runs[i].rep = next;
            renumbered += 1;
        }
        seen.insert((v, n, out.runs[i].rep));
    }
    if renumbered > 0 {
        out.config.reps = seen.iter().map(|k| k.2).max().unwrap_or(out.config.reps);
    }
    let planned = crate::plan::plan(&out.config.variants, &out.config.cpus, out.config.reps);
    out.complete = planned
        .iter()
        .all(|p| seen.contains(&(p.variant.clone(), p.cpus, p.rep)));
    Ok(out)
}

/// The note a plot of `file` carries when its runs come from hosts of different types.
pub fn mixed_hosts_note(file: &ResultsFile) -> Option<String> {
    let mut types: Vec<&crate::model::HostInfo> = Vec::new();
    for h in &file.hosts {
        if !types.iter().any(|t| crate::host::same_type(t, h)) {
            types.push(h);
        }
    }
    (types.len() > 1).then(|| {
        format!(
            "{}: runs from {} host types mixed ({})",
            file.name,
            types.len(),
            types
                .iter()
                .map(|h| format!("{}, {} cores", h.cpu_model, h.logical_cores))
                .collect::<Vec<_>>()
                .join("; ")
        )
    })
}
