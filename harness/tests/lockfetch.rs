//! Locked guests without the network: a tiny fake Debian archive (hand-made .deb files, built
//! here with `ar` + `tar`) served by a local HTTP server on 127.0.0.1, and `lockscale guest
//! build/export/import` against it: fetch, unpack and image hash; mirror fallback; a missing
//! file, a wrong hash and a cut-off download (nothing kept in the cache); an export carried to
//! another checkout; corrupt and foreign exports refused.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::*;
use lockscale::lock::{self, Lock, LockedPackage};
use lockscale::util::sha256_hex;
use lockscale::workload::Workload;

// ------------------------------------------------------------------ the fake archive

#[derive(Clone, Copy)]
enum Z {
    Xz,
    Gz,
    Zst,
}

enum Item<'a> {
    File(&'a str, &'a [u8], u32),
    Link(&'a str, &'a str),
    Hard(&'a str, &'a str),
}

fn compress(z: Z, data: &[u8]) -> (Vec<u8>, &'static str) {
    match z {
        Z::Xz => {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
            e.write_all(data).unwrap();
            (e.finish().unwrap(), "xz")
        }
        Z::Gz => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            (e.finish().unwrap(), "gz")
        }
        Z::Zst => (zstd::stream::encode_all(data, 3).unwrap(), "zst"),
    }
}

fn tar_of(items: &[Item]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs = std::collections::BTreeSet::new();
    let mut dir = |b: &mut tar::Builder<Vec<u8>>, path: &str| {
        let mut at = String::from(".");
        for c in path
            .trim_start_matches("./")
            .split('/')
            .collect::<Vec<_>>()
            .iter()
            .rev()
            .skip(1)
            .rev()
        {
            at = format!("{at}/{c}");
            if dirs.insert(at.clone()) {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Directory);
                h.set_path(format!("{at}/")).unwrap();
                h.set_mode(0o755);
                h.set_size(0);
                h.set_cksum();
                b.append(&h, &[][..]).unwrap();
            }
        }
    };
    for it in items {
        let mut h = tar::Header::new_gnu();
        match it {
            Item::File(p, data, mode) => {
                dir(&mut b, p);
                h.set_entry_type(tar::EntryType::Regular);
                h.set_path(p).unwrap();
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                h.set_cksum();
                b.append(&h, *data).unwrap();
            }
            Item::Link(p, target) | Item::Hard(p, target) => {
                dir(&mut b, p);
                h.set_entry_type(if matches!(it, Item::Link(..)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                });
                h.set_path(p).unwrap();
                h.set_link_name(target).unwrap();
                h.set_mode(0o777);
                h.set_size(0);
                h.set_cksum();
                b.append(&h, &[][..]).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

/// A .deb: `ar` with debian-binary, control.tar.gz and data.tar.<z>.
fn deb(name: &str, version: &str, arch: &str, z: Z, items: &[Item]) -> Vec<u8> {
    // make needs zlib1g, which nothing asks for: the lock's one dependency.
    let extra = match name {
        "make" => "Depends: zlib1g (>= 1:1.2), awk | mawk\n",
        "zlib1g" => "Provides: awk\n",
        _ => "",
    };
    let control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: {arch}\n{extra}Description: test\n"
    );
    let control_tar = tar_of(&[Item::File("./control", control.as_bytes(), 0o644)]);
    let (control_gz, _) = compress(Z::Gz, &control_tar);
    let (data, ext) = compress(z, &tar_of(items));
    let mut a = ar::Builder::new(Vec::new());
    for (id, bytes) in [
        ("debian-binary".to_string(), b"2.0\n".to_vec()),
        ("control.tar.gz".to_string(), control_gz),
        (format!("data.tar.{ext}"), data),
    ] {
        a.append(
            &ar::Header::new(id.into_bytes(), bytes.len() as u64),
            &bytes[..],
        )
        .unwrap();
    }
    a.into_inner().unwrap()
}

/// The fake archive: linux-make's six requested packages, a few MB of nothing, in the three
/// compressions. Returns (pool path → bytes, the lock).
fn archive() -> (Vec<(String, Vec<u8>)>, Lock) {
    let kernel: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let debs: Vec<(&str, &str, &str, Vec<u8>)> = vec![
        (
            "binutils",
            "2.40-2",
            "ppc64el",
            deb(
                "binutils",
                "2.40-2",
                "ppc64el",
                Z::Gz,
                &[
                    Item::File("./usr/bin/as", b"\x7fELF as", 0o755),
                    Item::Hard("./usr/bin/powerpc64le-linux-gnu-as", "./usr/bin/as"),
                ],
            ),
        ),
        (
            "busybox-static",
            "1:1.35.0-4",
            "ppc64el",
            deb(
                "busybox-static",
                "1:1.35.0-4",
                "ppc64el",
                Z::Gz,
                &[Item::File("./bin/busybox", b"\x7fELF busybox", 0o755)],
            ),
        ),
        (
            "gcc",
            "4:12.2.0-3",
            "ppc64el",
            deb(
                "gcc",
                "4:12.2.0-3",
                "ppc64el",
                Z::Xz,
                &[
                    Item::File("./usr/bin/gcc-12", b"\x7fELF gcc", 0o755),
                    Item::Link("./usr/bin/gcc", "gcc-12"),
                ],
            ),
        ),
        (
            "libc6-dev",
            "2.36-9",
            "ppc64el",
            deb(
                "libc6-dev",
                "2.36-9",
                "ppc64el",
                Z::Xz,
                &[
                    Item::File("./usr/include/stdio.h", b"/* stdio */\n", 0o644),
                    Item::File("./usr/share/doc/libc6-dev/copyright", b"left out\n", 0o644),
                ],
            ),
        ),
        (
            "linux-image-powerpc64le",
            "6.1.1-1",
            "ppc64el",
            deb(
                "linux-image-powerpc64le",
                "6.1.1-1",
                "ppc64el",
                Z::Xz,
                &[Item::File(
                    "./boot/vmlinux-6.1.0-test-powerpc64le",
                    &kernel,
                    0o644,
                )],
            ),
        ),
        (
            "make",
            "4.3-4.1",
            "ppc64el",
            deb(
                "make",
                "4.3-4.1",
                "ppc64el",
                Z::Zst,
                &[Item::File("./usr/bin/make", b"\x7fELF make", 0o755)],
            ),
        ),
        (
            "zlib1g",
            "1:1.2.13.dfsg-1",
            "ppc64el",
            deb(
                "zlib1g",
                "1:1.2.13.dfsg-1",
                "ppc64el",
                Z::Xz,
                &[Item::File(
                    "./lib/powerpc64le-linux-gnu/libz.so.1",
                    b"\x7fELF z",
                    0o644,
                )],
            ),
        ),
    ];
    let mut files = Vec::new();
    let mut packages = Vec::new();
    for (name, version, arch, bytes) in debs {
        let bare = version.split_once(':').map_or(version, |(_, v)| v);
        let filename = format!("pool/main/{}/{name}/{name}_{bare}_{arch}.deb", &name[..1]);
        packages.push(LockedPackage {
            name: name.into(),
            version: version.into(),
            architecture: arch.into(),
            filename: filename.clone(),
            size: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            suite: None,
        });
        files.push((filename, bytes));
    }
    let lock = Lock {
        format: lock::FORMAT.into(),
        workload: "linux-make".into(),
        suite: "bookworm".into(),
        extra_suites: vec![],
        architecture: lock::ARCH.into(),
        component: lock::COMPONENT.into(),
        resolved: "2026-12-04T00:00:00Z".into(),
        resolved_from: "http://127.0.0.1/test".into(),
        release_date: "Sat, 11 Jul 2026 10:16:37 UTC".into(),
        snapshot: "20261204T000000Z".into(),
        requested: lock::requested(Workload::LinuxMake),
        packages,
    };
    lock.check(Workload::LinuxMake).unwrap();
    (files, lock)
}

// ------------------------------------------------------------------ the server

#[derive(Clone)]
enum Resp {
    Body(Vec<u8>),
    /// Declares the full length, sends only this many bytes, closes.
    Cut(Vec<u8>, usize),
}

/// A tiny HTTP/1.1 server on 127.0.0.1: GET and HEAD of the routes, 404 for anything else.
struct Server {
    base: String,
    routes: Arc<Mutex<HashMap<String, Resp>>>,
    hits: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start() -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let routes: Arc<Mutex<HashMap<String, Resp>>> = Arc::default();
        let hits: Arc<Mutex<Vec<String>>> = Arc::default();
        let (r, h) = (routes.clone(), hits.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut s) = conn else { continue };
                let (r, h) = (r.clone(), h.clone());
                std::thread::spawn(move || {
                    let mut rd = BufReader::new(s.try_clone().unwrap());
                    let mut line = String::new();
                    if rd.read_line(&mut line).is_err() {
                        return;
                    }
                    loop {
                        let mut hdr = String::new();
                        if rd.read_line(&mut hdr).unwrap_or(0) == 0 || hdr == "\r\n" {
                            break;
                        }
                    }
                    let mut it = line.split_whitespace();
                    let (method, path) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
                    h.lock().unwrap().push(path.to_string());
                    let resp = r.lock().unwrap().get(path).cloned();
                    let head = method == "HEAD";
                    let _ = match resp {
                        None => s.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        ),
                        Some(Resp::Body(b)) => {
                            let _ = write!(
                                s,
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            );
                            if head { Ok(()) } else { s.write_all(&b) }
                        }
                        Some(Resp::Cut(b, n)) => {
                            let _ = write!(
                                s,
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            );
                            if head { Ok(()) } else { s.write_all(&b[..n]) }
                        }
                    };
                    let _ = s.flush();
                });
            }
        });
        Server { base, routes, hits }
    }

    /// Serves the files under the mirror path `m` (e.g. `/a`).
    fn mirror(&self, m: &str, files: &[(String, Vec<u8>)]) -> String {
        let mut r = self.routes.lock().unwrap();
        for (p, b) in files {
            r.insert(format!("{m}/{p}"), Resp::Body(b.clone()));
        }
        format!("{}{m}", self.base)
    }

    fn set(&self, path: &str, resp: Resp) {
        self.routes.lock().unwrap().insert(path.into(), resp);
    }
}

// ------------------------------------------------------------------ helpers

/// A scratch checkout with /init and the fake archive's lock.
fn checkout(lock: &Lock) -> Scratch {
    let s = Scratch::new();
    let init = s.p(lockscale::guest::INIT_SCRIPT);
    std::fs::create_dir_all(init.parent().unwrap()).unwrap();
    std::fs::copy(workspace().join(lockscale::guest::INIT_SCRIPT), &init).unwrap();
    std::fs::write(
        lock::lock_path(s.path(), Workload::LinuxMake),
        lock.to_text(),
    )
    .unwrap();
    s
}

fn build(s: &Scratch, mirrors: &[&str], extra: &[&str]) -> std::process::Output {
    let mut a = vec!["guest", "build", "linux-make", "--quick"];
    for m in mirrors {
        a.extend(["--mirror", m]);
    }
    a.extend(extra);
    s.run(&a, &[])
}

/// The `image PATH sha256 HEX` line's hash.
fn image_sha(o: &std::process::Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("image "))
        .unwrap_or_else(|| panic!("no image line in {}", text(o)));
    line.rsplit(' ').next().unwrap().to_string()
}

/// Every file under a directory (relative paths with their bytes' hash), or none.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    if !dir.exists() {
        return vec![];
    }
    let mut v: Vec<(String, String)> = walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let h = if e.file_type().is_file() {
                sha256_hex(&std::fs::read(e.path()).unwrap())
            } else {
                String::new()
            };
            (rel, h)
        })
        .collect();
    v.sort();
    v
}

fn cache(s: &Scratch) -> PathBuf {
    s.p("target/guest-cache")
}

fn refused(o: &std::process::Output, want: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    for w in want {
        assert!(err.contains(w), "expected {w:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

// ------------------------------------------------------------------ the tests

#[test]
fn builds_from_the_lock_the_same_bytes_twice_and_records_them() {
    let (files, lock) = archive();
    let srv = Server::start();
    let m = srv.mirror("/debian", &files);
    let s = checkout(&lock);
    let o = build(&s, &[&m], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let first = image_sha(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--record"),
        "{}",
        text(&o)
    );
    // Unpacked merged-/usr, docs left out, links kept, hard links as files.
    let root = cache(&s).join("debian-ppc64el/rootfs");
    assert!(root.join("usr/bin/busybox").is_file());
    assert!(!root.join("bin").exists());
    assert_eq!(
        std::fs::read_link(root.join("usr/bin/gcc")).unwrap(),
        Path::new("gcc-12")
    );
    assert_eq!(
        std::fs::read(root.join("usr/bin/powerpc64le-linux-gnu-as")).unwrap(),
        b"\x7fELF as"
    );
    assert!(!root.join("usr/share/doc").exists());
    assert!(root.join("usr/include/stdio.h").is_file());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(root.join("usr/bin/make"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o755
    );
    // The manifest names the lock and its hash; the kernel lies beside the image.
    let dir = lockscale::guest::image_dir(s.path(), Workload::LinuxMake, 2, 2);
    let man: lockscale::model::GuestManifest =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(man.lock_sha256, sha256_hex(lock.to_text().as_bytes()));
    assert_eq!(man.suite, "bookworm/ppc64el");
    assert_eq!(man.packages.len(), 7);
    assert!(
        root.join("usr/lib/powerpc64le-linux-gnu/libz.so.1")
            .is_file()
    );
    assert!(dir.join("vmlinux-6.1.0-test-powerpc64le").is_file());
    // Record, then build again from nothing: the same bytes, checked against the record.
    let o = build(&s, &[&m], &["--record"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(s.p("workloads/linux/images.json").is_file());
    std::fs::remove_dir_all(cache(&s)).unwrap();
    let o = build(&s, &[&m], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(image_sha(&o), first);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is the one recorded"),
        "{}",
        text(&o)
    );
    // A second checkout builds the same bytes, and a cached image needs no mirror at all.
    let s2 = checkout(&lock);
    let o = build(&s2, &[&m], &[]);
    assert_eq!(image_sha(&o), first, "{}", text(&o));
    let o = build(&s2, &["http://127.0.0.1:1/nothing"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    // A recorded hash the build does not reach is an error.
    let rec = s.p("workloads/linux/images.json");
    let t = std::fs::read_to_string(&rec)
        .unwrap()
        .replace(&first, &"0".repeat(64));
    std::fs::write(&rec, t).unwrap();
    let o = build(&s, &[&m], &["--force"]);
    refused(&o, &["records", "not reproducible"]);
    // A sweep refuses it too, and --record takes the new one.
    let o = s.run(
        &[
            "sweep",
            "--no-plot",
            "--workload",
            "linux-make",
            "--quick",
            "--no-build",
        ],
        &[],
    );
    refused(&o, &["not reproducible"]);
    let o = build(&s, &[&m], &["--record"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read_to_string(&rec).unwrap().contains(&first));
}

#[test]
fn falls_back_to_the_next_mirror() {
    let (files, lock) = archive();
    let srv = Server::start();
    // Mirror a has half the files and a damaged copy of one; b has them all.
    let a = srv.mirror("/a", &files[..3]);
    let mut bad = files[1].1.clone();
    let n = bad.len() - 10;
    bad[n] ^= 1;
    srv.set(&format!("/a/{}", files[1].0), Resp::Body(bad));
    let b = srv.mirror("/b", &files);
    let s = checkout(&lock);
    let o = build(&s, &[&a, &b], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let hits = srv.hits.lock().unwrap().clone();
    assert!(hits.iter().any(|h| h.starts_with("/a/")) && hits.iter().any(|h| h.starts_with("/b/")));
    let one = checkout(&lock);
    let o1 = build(&one, &[&b], &[]);
    assert_eq!(image_sha(&o), image_sha(&o1));
}

#[test]
fn a_file_missing_from_every_mirror_names_it_and_writes_nothing() {
    let (files, lock) = archive();
    let srv = Server::start();
    let a = srv.mirror("/a", &files[1..]);
    let b = srv.mirror("/b", &files[2..]);
    let s = checkout(&lock);
    let o = build(&s, &[&a, &b], &[]);
    let p = &lock.packages[0];
    refused(
        &o,
        &[
            &format!("{} {}", p.name, p.version),
            "missing from every mirror",
            &format!("{a}/{}", p.filename),
            &format!("{b}/{}", p.filename),
            "HTTP 404",
            "lockscale guest lock linux-make",
            "cache was not changed",
        ],
    );
    assert_eq!(files_under(&cache(&s)), vec![]);
    assert_eq!(files_under(&s.p("target")), vec![]);
}

#[test]
fn a_wrong_hash_or_a_cut_off_download_keeps_nothing() {
    let (files, lock) = archive();
    let srv = Server::start();
    let m = srv.mirror("/m", &files);
    // Same length, one byte changed: the hash names it.
    let mut bad = files[4].1.clone();
    bad[100] ^= 0xff;
    srv.set(&format!("/m/{}", files[4].0), Resp::Body(bad));
    let s = checkout(&lock);
    let p = &lock.packages[4];
    refused(
        &build(&s, &[&m], &[]),
        &[
            &p.label(),
            "SHA-256 mismatch",
            &p.sha256,
            "nothing was kept",
        ],
    );
    assert_eq!(files_under(&s.p("target")), vec![]);
    // A short file (the server says so): truncated.
    let short = files[4].1[..1000].to_vec();
    srv.set(&format!("/m/{}", files[4].0), Resp::Body(short));
    refused(
        &build(&s, &[&m], &[]),
        &[&p.label(), "truncated: 1000 of the locked"],
    );
    assert_eq!(files_under(&s.p("target")), vec![]);
    // The connection drops in the middle of the body.
    srv.set(
        &format!("/m/{}", files[4].0),
        Resp::Cut(files[4].1.clone(), 5000),
    );
    refused(&build(&s, &[&m], &[]), &[&p.label(), "cut off"]);
    assert_eq!(files_under(&s.p("target")), vec![]);
    // A cached file that went bad is fetched again, not used.
    srv.set(
        &format!("/m/{}", files[4].0),
        Resp::Body(files[4].1.clone()),
    );
    let o = build(&s, &[&m], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let good = image_sha(&o);
    let cached = cache(&s)
        .join("debs")
        .join(files[4].0.rsplit('/').next().unwrap());
    std::fs::write(&cached, b"rot").unwrap();
    let o = build(&s, &[&m], &["--force"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(image_sha(&o), good);
}

#[test]
fn a_hand_edited_lock_is_refused_before_anything_is_fetched() {
    let (files, lock) = archive();
    let srv = Server::start();
    let m = srv.mirror("/m", &files);
    let s = checkout(&lock);
    let path = lock::lock_path(s.path(), Workload::LinuxMake);
    let text0 = lock.to_text();
    for (from, to, want) in [
        (
            "\"version\":\"4.3-4.1\"",
            "\"version\":\"4.4-1\"",
            "do not match its file",
        ),
        (
            "\"suite\": \"bookworm\"",
            "\"suite\": \"stable\"",
            "moving alias",
        ),
        ("\"name\":\"make\"", "\"name\":\"gcc\"", "listed twice"),
        ("\"packages\": [", "\"packages\": ", "guest lock linux-make"),
    ] {
        assert!(text0.contains(from), "{from}");
        std::fs::write(&path, text0.replacen(from, to, 1)).unwrap();
        refused(&build(&s, &[&m], &[]), &[want]);
    }
    assert!(srv.hits.lock().unwrap().is_empty());
    // A version edited together with its file and hash: no mirror has it.
    let mut l = lock.clone();
    let i = l.packages.iter().position(|p| p.name == "make").unwrap();
    l.packages[i].version = "4.4-1".into();
    l.packages[i].filename = "pool/main/m/make/make_4.4-1_ppc64el.deb".into();
    std::fs::write(&path, l.to_text()).unwrap();
    refused(
        &build(&s, &[&m], &[]),
        &["make 4.4-1", "missing from every mirror"],
    );
    // A file whose control file names another package than the lock says.
    let mut l = lock.clone();
    let forged = deb("make", "4.3-4.2", "ppc64el", Z::Gz, &[]);
    l.packages[i].sha256 = sha256_hex(&forged);
    l.packages[i].size = forged.len() as u64;
    srv.set(
        &format!("/m/{}", l.packages[i].filename),
        Resp::Body(forged),
    );
    std::fs::write(&path, l.to_text()).unwrap();
    refused(&build(&s, &[&m], &[]), &["control file says make 4.3-4.2"]);
    // A dependency dropped by hand: fetched and unpacked, but not installable.
    srv.set(
        &format!("/m/{}", files[i].0),
        Resp::Body(files[i].1.clone()),
    );
    let mut l = lock.clone();
    l.packages.retain(|p| p.name != "zlib1g");
    std::fs::write(&path, l.to_text()).unwrap();
    refused(
        &build(&s, &[&m], &[]),
        &[
            "cannot be installed",
            "make 4.3-4.1 Depends `zlib1g (>= 1:1.2)`",
            "guest lock linux-make",
        ],
    );
    assert!(
        !lockscale::guest::image_dir(s.path(), Workload::LinuxMake, 2, 2)
            .join("manifest.json")
            .exists()
    );
}

#[test]
fn an_export_carries_the_image_and_a_corrupt_or_foreign_one_is_refused() {
    let (files, lock) = archive();
    let srv = Server::start();
    let m = srv.mirror("/m", &files);
    let a = checkout(&lock);
    let o = build(&a, &[&m], &[]);
    let sha = image_sha(&o);
    let out = a.p("linux-make.guest.tar");
    let o = a.run(
        &[
            "guest",
            "export",
            "linux-make",
            "--quick",
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));

    // Another checkout, no mirror: import, then the build finds it.
    let b = checkout(&lock);
    let o = b.run(&["guest", "import", out.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(image_sha(&o), sha);
    let o = build(&b, &["http://127.0.0.1:1/nothing"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(image_sha(&o), sha);
    assert!(!b.p("target/guest-cache/debs").exists());
    // A sweep on the imported image: no fetch, and its results record the lock.
    let mut sw = vec![
        "sweep",
        "--no-plot",
        "--workload",
        "linux-make",
        "--quick",
        "--variants",
        "baseline",
        "--cpus",
        "1",
        "--reps",
        "1",
        "--name",
        "carried",
    ];
    let bins = b.bins(&["baseline"]);
    sw.extend(bins.iter().map(String::as_str));
    let o = b.run(&sw, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let f = load(&b.p("results/carried.json"));
    let man = f.workload.manifest.unwrap();
    assert_eq!(man.lock_sha256, sha256_hex(lock.to_text().as_bytes()));
    assert_eq!(f.workload.image_sha256, sha);
    assert!(!b.p("target/guest-cache/debs").exists());

    let before = files_under(&cache(&b));
    let bytes = std::fs::read(&out).unwrap();
    let check_refused = |name: &str, data: &[u8], want: &[&str]| {
        let f = b.p(name);
        std::fs::write(&f, data).unwrap();
        refused(&b.run(&["guest", "import", f.to_str().unwrap()], &[]), want);
        assert_eq!(files_under(&cache(&b)), before, "{name} changed the cache");
    };
    // A flipped byte in the image, a cut-off file, not an export at all.
    let mut bad = bytes.clone();
    let at = bytes.len() / 2;
    bad[at] ^= 0x55;
    check_refused(
        "flipped.tar",
        &bad,
        &["refused", "damaged", "cache was not changed"],
    );
    check_refused("cut.tar", &bytes[..bytes.len() / 3], &["refused"]);
    check_refused(
        "junk.tar",
        b"this is not a tar file at all, not even close",
        &["refused"],
    );
    let other = tar_of(&[Item::File("README", b"hello", 0o644)]);
    check_refused("other.tar", &other, &["not a lockscale guest export"]);
    // An export of another lock: a different guest.
    let mut l2 = lock.clone();
    l2.resolved = "2026-12-05T00:00:00Z".into();
    let c = checkout(&l2);
    let o = build(&c, &[&m], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out2 = c.p("other.guest.tar");
    let o = c.run(
        &[
            "guest",
            "export",
            "linux-make",
            "--quick",
            "-o",
            out2.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    check_refused(
        "foreign.tar",
        &std::fs::read(&out2).unwrap(),
        &["built from another lock"],
    );
}

#[test]
fn the_results_of_different_locks_are_flagged_by_compare() {
    let (_, lock) = archive();
    let mut a = synthetic("a", &[("baseline", 1, vec![10.0, 10.1, 9.9, 10.0, 10.2])]);
    let mut b = synthetic("b", &[("baseline", 1, vec![10.0, 10.1, 9.9, 10.0, 10.2])]);
    let man = |sha: &str| lockscale::model::GuestManifest {
        workload: "linux-make".into(),
        suite: "bookworm/ppc64el".into(),
        lock: "workloads/linux/packages.lock".into(),
        lock_sha256: sha.into(),
        packages: lockscale::guest::packages_of_lock(&lock),
        kernel: "k".into(),
        kernel_sha256: "0".repeat(64),
        initrd: "i".into(),
        initrd_sha256: "0".repeat(64),
        initrd_bytes: 1,
        entries: 1,
        units: 2,
        size: 2,
        built: "2026-12-04T00:00:00Z".into(),
        inputs_sha256: String::new(),
        prepared: None,
    };
    a.workload.manifest = Some(man(&"1".repeat(64)));
    b.workload.manifest = Some(man(&"2".repeat(64)));
    let notes = lockscale::compare::check_comparable(&a, &b).unwrap();
    assert!(
        notes.iter().any(|n| n.contains("different package locks")),
        "{notes:?}"
    );
    b.workload.manifest = Some(man(&"1".repeat(64)));
    let notes = lockscale::compare::check_comparable(&a, &b).unwrap();
    assert!(
        !notes.iter().any(|n| n.contains("package lock")),
        "{notes:?}"
    );
}
