//! The SHA-256s each workload's images are expected to have (`images.json` beside its lock),
//! and the check of a built image against them.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::model::GuestManifest;
use crate::util::{now_rfc3339, write_atomic};
use crate::workload::Workload;

/// The SHA-256s a workload's images are expected to have, committed beside its lock
/// (`images.json`): one entry per size, valid for one lock, one set of image inputs (/init,
/// the project) and, for kernel-make, one configure run's archive.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRecords {
    pub format: String,
    pub images: Vec<ImageRecord>,
}

/// The format of `images.json`.
pub const IMAGES_FORMAT: &str = "lockscale.guest-images/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRecord {
    pub workload: String,
    pub units: u32,
    pub size: u32,
    pub lock_sha256: String,
    pub inputs_sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared_archive_sha256: Option<String>,
    pub kernel_sha256: String,
    pub initrd_sha256: String,
    pub initrd_bytes: u64,
    /// When it was recorded (UTC, RFC 3339).
    pub recorded: String,
}

/// Where a workload's image records live: beside its lock.
pub fn images_path(repo: &Path, workload: Workload) -> PathBuf {
    crate::lock::lock_path(repo, workload).with_file_name("images.json")
}

impl ImageRecords {
    pub fn load(repo: &Path, workload: Workload) -> Result<ImageRecords> {
        let path = images_path(repo, workload);
        let Ok(text) = fs::read_to_string(&path) else {
            return Ok(ImageRecords {
                format: IMAGES_FORMAT.into(),
                images: vec![],
            });
        };
        let r: ImageRecords = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a list of image hashes", path.display()))?;
        if r.format != IMAGES_FORMAT {
            bail!(
                "{}: format {:?}, expected {IMAGES_FORMAT:?}",
                path.display(),
                r.format
            );
        }
        Ok(r)
    }

    fn find(&self, m: &GuestManifest) -> Option<&ImageRecord> {
        self.images
            .iter()
            .find(|r| r.workload == m.workload && r.units == m.units && r.size == m.size)
    }

    /// Whether an image is the recorded one.
    pub fn check(&self, m: &GuestManifest) -> RecordCheck {
        let Some(r) = self.find(m) else {
            return RecordCheck::NotRecorded("no SHA-256 is recorded for this image yet".into());
        };
        let prepared = m.prepared.as_ref().map(|p| p.archive_sha256.clone());
        if r.lock_sha256 != m.lock_sha256 {
            return RecordCheck::NotRecorded("the recorded SHA-256 is of another lock".into());
        }
        if r.inputs_sha256 != m.inputs_sha256 {
            return RecordCheck::NotRecorded(
                "the recorded SHA-256 is of another /init or project".into(),
            );
        }
        if r.prepared_archive_sha256 != prepared {
            return RecordCheck::NotRecorded(
                "the recorded SHA-256 is of another configure run".into(),
            );
        }
        if (r.initrd_sha256.as_str(), r.kernel_sha256.as_str())
            != (m.initrd_sha256.as_str(), m.kernel_sha256.as_str())
        {
            return RecordCheck::Differs(r.initrd_sha256.clone());
        }
        RecordCheck::Matches
    }

    /// Records (or replaces) the entry of an image and writes the file.
    pub fn record(repo: &Path, m: &GuestManifest) -> Result<PathBuf> {
        let workload = Workload::from_name(&m.workload).context("unknown workload")?;
        let mut r = ImageRecords::load(repo, workload)?;
        r.images
            .retain(|x| !(x.workload == m.workload && x.units == m.units && x.size == m.size));
        r.images.push(ImageRecord {
            workload: m.workload.clone(),
            units: m.units,
            size: m.size,
            lock_sha256: m.lock_sha256.clone(),
            inputs_sha256: m.inputs_sha256.clone(),
            prepared_archive_sha256: m.prepared.as_ref().map(|p| p.archive_sha256.clone()),
            kernel_sha256: m.kernel_sha256.clone(),
            initrd_sha256: m.initrd_sha256.clone(),
            initrd_bytes: m.initrd_bytes,
            recorded: now_rfc3339(),
        });
        r.images
            .sort_by_key(|x| (x.workload.clone(), x.units, x.size));
        let path = images_path(repo, workload);
        let mut text = serde_json::to_string_pretty(&r)?;
        text.push('\n');
        write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }
}

/// An image against its record.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordCheck {
    /// The recorded SHA-256, for the same lock and inputs.
    Matches,
    /// Nothing recorded for this lock and these inputs (why).
    NotRecorded(String),
    /// Same lock and inputs, another image (the recorded SHA-256).
    Differs(String),
}

/// Checks an image against the SHA-256 recorded beside its lock: an error when the record is
/// for the same lock and inputs but names another image; else what the record says.
pub fn check_record(repo: &Path, m: &GuestManifest) -> Result<RecordCheck> {
    let workload = Workload::from_name(&m.workload).context("unknown workload")?;
    let check = ImageRecords::load(repo, workload)?.check(m);
    if let RecordCheck::Differs(want) = &check {
        bail!(
            "the image {} has SHA-256 {}, but {} records {want} for the same lock and inputs: \
             the image writer changed (then record the new one with `lockscale guest build \
             {workload} --record` and commit it) or the build is not reproducible",
            m.initrd,
            m.initrd_sha256,
            images_path(repo, workload).display()
        );
    }
    Ok(check)
}
