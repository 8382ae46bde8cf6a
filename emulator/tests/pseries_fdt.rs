//! Device-tree fidelity: the tree `ppc64emu --dump-dtb` writes, read back with the `fdt`
//! crate, against the tree QEMU 7.2 writes for the same machine (`-M pseries,dumpdtb=F
//! -cpu power8 -smp 2 -m 1G -append "jobs=2 hello"`, pseries_data/…dts). Every node and
//! property must be there with the same value, except the intended differences listed below.
//! Where `dtc` is installed, it must decode our blob to the same tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------------------
// Intended differences from QEMU 7.2's tree.

/// Nodes QEMU has and we do not (with everything below them).
const ABSENT_NODES: &[(&str, &str)] = &[
    ("/ibm,persistent-memory", "no NVDIMMs"),
    (
        "/event-sources",
        "no EPOW/hot-plug events (check-exception never finds one)",
    ),
    (
        "/pci@800000020000000",
        "no PCI host bridge (no VGA, no USB)",
    ),
    (
        "/vdevice/nvram@71000001",
        "only the console is a VIO device",
    ),
    (
        "/vdevice/l-lan@71000002",
        "only the console is a VIO device",
    ),
    (
        "/vdevice/v-scsi@71000003",
        "only the console is a VIO device",
    ),
];

/// Properties QEMU has and we do not: (node, property or "*prefix"), reason.
const ABSENT_PROPS: &[(&str, &str, &str)] = &[
    (
        "/",
        "*ibm,drc-",
        "no dynamic-reconfiguration connectors: no hotplug",
    ),
    ("/", "vm,uuid", "no VM UUID"),
    (
        "/chosen",
        "ibm,arch-vec-5-platform-support",
        "read only by prom_init, which never runs",
    ),
    ("/chosen", "linux,pci-probe-only", "no PCI"),
    (
        "/chosen",
        "*qemu,",
        "SLOF/graphics hand-over; no SLOF, no display",
    ),
    ("/rtas", "qemu,hypertas-functions", "QEMU-private hcalls"),
    ("/rtas", "ibm,change-msix-capable", "no PCI"),
    (
        "/rtas",
        "rtas-event-scan-rate",
        "event-scan never has an event: no rate, so Linux does not poll it",
    ),
    ("/rtas", "ibm,max-associativity-domains", "no NUMA"),
    ("/rtas", "ibm,associativity-reference-points", "no NUMA"),
    ("/cpus", "*ibm,drc-", "no CPU hotplug"),
    (
        "/cpus/PowerPC,POWER8@*",
        "ibm,my-drc-index",
        "no CPU hotplug",
    ),
    (
        "/cpus/PowerPC,POWER8@*",
        "ibm,dfp",
        "decimal floating point is not emulated",
    ),
    (
        "/cpus/PowerPC,POWER8@*",
        "ibm,purr",
        "PURR is not emulated: Linux accounts with the timebase",
    ),
    (
        "/cpus/PowerPC,POWER8@*",
        "ibm,spurr",
        "SPURR is not emulated",
    ),
    ("/memory@0", "ibm,associativity", "no NUMA"),
];

/// RTAS services QEMU offers and we do not (their token properties are absent).
const ABSENT_RTAS_SERVICES: &[&str] = &[
    "ibm,nmi-interlock",
    "ibm,nmi-register",
    "ibm,suspend-me",
    "ibm,reset-pe-dma-window",
    "ibm,remove-pe-dma-window",
    "ibm,create-pe-dma-window",
    "ibm,query-pe-dma-window",
    "ibm,slot-error-detail",
    "ibm,configure-pe",
    "ibm,set-slot-reset",
    "ibm,read-slot-reset-state2",
    "ibm,get-config-addr-info2",
    "ibm,set-eeh-option",
    "ibm,configure-connector",
    "get-sensor-state",
    "set-indicator",
    "ibm,change-msi",
    "ibm,query-interrupt-source-number",
    "ibm,write-pci-config",
    "ibm,read-pci-config",
    "write-pci-config",
    "read-pci-config",
    "nvram-store",
    "nvram-fetch",
    "quiesce",
    "ibm,set-tce-bypass",
    "ibm,get-system-parameter",
];

/// Properties present on both sides with a different value: (node, property), reason.
const DIFFERENT_VALUES: &[(&str, &str, &str)] = &[
    ("/", "model", "names ppc64emu instead of qemu"),
    ("/chosen", "rng-seed", "random on every boot, on both"),
    (
        "/rtas",
        "rtas-size",
        "our blob is the 20-byte H_RTAS trampoline; QEMU sizes SLOF's with FWNMI logs",
    ),
    (
        "/rtas",
        "ibm,hypertas-functions",
        "the subset we implement, checked below",
    ),
];

/// Properties we add: (node, property), reason.
const ADDED_PROPS: &[(&str, &str, &str)] = &[
    (
        "/rtas",
        "linux,rtas-base",
        "RTAS comes instantiated (on QEMU, SLOF instantiates it)",
    ),
    ("/rtas", "linux,rtas-entry", "RTAS comes instantiated"),
];

// ---------------------------------------------------------------------------------------
// A device tree as nodes of raw property values.

#[derive(Debug, Default, PartialEq, Eq, Clone)]
struct Node {
    props: BTreeMap<String, Vec<u8>>,
    children: BTreeMap<String, Node>,
}

impl Node {
    /// Every node with its path.
    fn walk<'a>(&'a self, path: &str, out: &mut Vec<(String, &'a Node)>) {
        out.push((path.to_string(), self));
        for (name, c) in &self.children {
            let p = if path == "/" {
                format!("/{name}")
            } else {
                format!("{path}/{name}")
            };
            c.walk(&p, out);
        }
    }

    fn at(&self, path: &str) -> Option<&Node> {
        path.split('/')
            .filter(|s| !s.is_empty())
            .try_fold(self, |n, part| n.children.get(part))
    }
}

/// A minimal DTS reader: enough for `dtc -O dts` output and QEMU's dump (nodes, empty
/// properties, strings, `<cells>`, `[bytes]`, comma-separated lists, /memreserve/).
fn parse_dts(text: &str) -> (Vec<(u64, u64)>, Node) {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let mut rsv = Vec::new();
    let mut root = Node::default();
    loop {
        p.ws();
        if p.i >= p.s.len() {
            break;
        }
        if p.eat("/dts-v1/") {
            p.expect(b';');
        } else if p.eat("/memreserve/") {
            let a = p.number();
            let b = p.number();
            p.expect(b';');
            rsv.push((a, b));
        } else if p.eat("/") {
            p.ws();
            p.node_body(&mut root);
        } else {
            panic!("dts: unexpected text at {}: {:?}", p.i, p.rest());
        }
    }
    (rsv, root)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn rest(&self) -> String {
        String::from_utf8_lossy(&self.s[self.i..(self.i + 40).min(self.s.len())]).into_owned()
    }

    fn ws(&mut self) {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            if self.s[self.i..].starts_with(b"//") {
                while self.i < self.s.len() && self.s[self.i] != b'\n' {
                    self.i += 1;
                }
            } else if self.s[self.i..].starts_with(b"/*") {
                let end = self.s[self.i..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .expect("unterminated comment");
                self.i += end + 2;
            } else {
                return;
            }
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) {
        self.ws();
        assert_eq!(
            self.s.get(self.i),
            Some(&c),
            "dts: expected '{}' at {:?}",
            c as char,
            self.rest()
        );
        self.i += 1;
    }

    fn word(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && !self.s[self.i].is_ascii_whitespace()
            && !b"{}=;<>[]\"".contains(&self.s[self.i])
        {
            self.i += 1;
        }
        String::from_utf8(self.s[start..self.i].to_vec()).unwrap()
    }

    fn number(&mut self) -> u64 {
        let w = self.word();
        match w.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap(),
            None => w
                .parse()
                .unwrap_or_else(|_| panic!("dts: not a number: {w:?}")),
        }
    }

    fn node_body(&mut self, node: &mut Node) {
        self.expect(b'{');
        loop {
            self.ws();
            if self.eat("}") {
                self.expect(b';');
                return;
            }
            let name = self.word();
            assert!(
                !name.is_empty(),
                "dts: expected a name at {:?}",
                self.rest()
            );
            self.ws();
            match self.s[self.i] {
                b'{' => {
                    let mut child = Node::default();
                    self.node_body(&mut child);
                    node.children.insert(name, child);
                }
                b';' => {
                    self.i += 1;
                    node.props.insert(name, Vec::new());
                }
                b'=' => {
                    self.i += 1;
                    let v = self.value();
                    node.props.insert(name, v);
                }
                _ => panic!("dts: unexpected {:?}", self.rest()),
            }
        }
    }

    fn value(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            self.ws();
            match self.s[self.i] {
                b'"' => {
                    self.i += 1;
                    while self.s[self.i] != b'"' {
                        let c = self.s[self.i];
                        self.i += 1;
                        if c == b'\\' {
                            let e = self.s[self.i];
                            self.i += 1;
                            out.push(match e {
                                b'0' => 0,
                                b'n' => b'\n',
                                b't' => b'\t',
                                other => other,
                            });
                        } else {
                            out.push(c);
                        }
                    }
                    self.i += 1;
                    out.push(0);
                }
                b'<' => {
                    self.i += 1;
                    loop {
                        self.ws();
                        if self.eat(">") {
                            break;
                        }
                        out.extend_from_slice(&(self.number() as u32).to_be_bytes());
                    }
                }
                b'[' => {
                    self.i += 1;
                    loop {
                        self.ws();
                        if self.eat("]") {
                            break;
                        }
                        let w = self.word();
                        for k in (0..w.len()).step_by(2) {
                            out.push(u8::from_str_radix(&w[k..k + 2], 16).unwrap());
                        }
                    }
                }
                _ => panic!("dts: bad value at {:?}", self.rest()),
            }
            self.ws();
            if self.eat(",") {
                continue;
            }
            self.expect(b';');
            return out;
        }
    }
}

/// Our blob as a tree, through the `fdt` crate.
fn read_blob(blob: &[u8]) -> (Vec<(u64, u64)>, Node) {
    let f = fdt::Fdt::new(blob).expect("our blob parses");
    fn conv(n: fdt::node::FdtNode<'_, '_>) -> Node {
        let mut node = Node::default();
        for p in n.properties() {
            node.props.insert(p.name.to_string(), p.value.to_vec());
        }
        for c in n.children() {
            node.children.insert(c.name.to_string(), conv(c));
        }
        node
    }
    let rsv = f
        .memory_reservations()
        .map(|r| (r.address() as u64, r.size() as u64))
        .collect();
    (rsv, conv(f.find_node("/").unwrap()))
}

// ---------------------------------------------------------------------------------------

fn reference() -> (Vec<(u64, u64)>, Node) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pseries_data/qemu-7.2-pseries-power8-smp2.dts");
    parse_dts(&std::fs::read_to_string(path).unwrap())
}

fn scratch(name: &str) -> PathBuf {
    // One directory per test thread: tests running in parallel write files of the same name.
    let thread = format!("{:?}", std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let dir = std::env::temp_dir().join(format!(
        "ppc64emu-pseries-fdt-{}-{thread}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// An ELF64 LE image with one PT_LOAD of `size` bytes at p_paddr 0 (QEMU's probe image was
/// 0xf4 bytes: the reference reserves exactly that).
fn tiny_kernel(size: usize) -> PathBuf {
    let mut e = vec![0u8; 64 + 56];
    e[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
    e[16..18].copy_from_slice(&2u16.to_le_bytes());
    e[18..20].copy_from_slice(&21u16.to_le_bytes());
    e[20..24].copy_from_slice(&1u32.to_le_bytes());
    e[32..40].copy_from_slice(&64u64.to_le_bytes());
    e[52..54].copy_from_slice(&64u16.to_le_bytes());
    e[54..56].copy_from_slice(&56u16.to_le_bytes());
    e[56..58].copy_from_slice(&1u16.to_le_bytes());
    let ph = 64;
    e[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes());
    e[ph + 8..ph + 16].copy_from_slice(&120u64.to_le_bytes());
    e[ph + 32..ph + 40].copy_from_slice(&(size as u64).to_le_bytes());
    e[ph + 40..ph + 48].copy_from_slice(&(size as u64).to_le_bytes());
    e.extend(std::iter::repeat_n(0x60u8, size));
    let p = scratch(&format!("tiny-{size}.elf"));
    std::fs::write(&p, e).unwrap();
    p
}

fn dump(args: &[&str]) -> Vec<u8> {
    let out = scratch(&format!(
        "dump-{}.dtb",
        args.join("_").replace(['/', ' ', '='], "-")
    ));
    let status = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .args(args)
        .arg("--dump-dtb")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    std::fs::read(out).unwrap()
}

fn ours_like_reference() -> (Vec<u8>, Vec<(u64, u64)>, Node) {
    let k = tiny_kernel(0xf4);
    let blob = dump(&[
        "-M",
        "pseries",
        "-cpu",
        "power8",
        "-smp",
        "2",
        "-m",
        "1G",
        "-kernel",
        k.to_str().unwrap(),
        "-append",
        "jobs=2 hello",
    ]);
    let (rsv, tree) = read_blob(&blob);
    (blob, rsv, tree)
}

fn matches_node(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

fn matches_prop(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

#[test]
fn same_tree_as_qemu_except_the_listed_differences() {
    let (_, ref_tree) = reference();
    let (_, _, ours) = ours_like_reference();
    let mut problems = Vec::new();

    let mut ref_nodes = Vec::new();
    ref_tree.walk("/", &mut ref_nodes);
    for (path, rnode) in &ref_nodes {
        if ABSENT_NODES
            .iter()
            .any(|(n, _)| path == n || path.starts_with(&format!("{n}/")))
        {
            if ours.at(path).is_some() {
                problems.push(format!("{path}: listed as absent but present"));
            }
            continue;
        }
        let Some(onode) = ours.at(path) else {
            problems.push(format!("{path}: node missing"));
            continue;
        };
        for (name, rval) in &rnode.props {
            let absent = ABSENT_PROPS
                .iter()
                .any(|(n, p, _)| matches_node(n, path) && matches_prop(p, name))
                || (path == "/rtas" && ABSENT_RTAS_SERVICES.contains(&name.as_str()));
            let differs = DIFFERENT_VALUES
                .iter()
                .any(|(n, p, _)| n == path && p == name);
            match onode.props.get(name) {
                None if absent => {}
                Some(_) if absent => {
                    problems.push(format!("{path} {name}: listed as absent but present"))
                }
                None => problems.push(format!("{path} {name}: property missing")),
                Some(v) if !differs && v != rval => {
                    problems.push(format!("{path} {name}: {v:02x?} instead of {rval:02x?}"))
                }
                Some(_) => {}
            }
        }
    }
    // Nothing beyond QEMU's tree except the listed additions.
    let mut our_nodes = Vec::new();
    ours.walk("/", &mut our_nodes);
    for (path, onode) in &our_nodes {
        let Some(rnode) = ref_tree.at(path) else {
            problems.push(format!("{path}: node QEMU does not have"));
            continue;
        };
        for name in onode.props.keys() {
            if !rnode.props.contains_key(name)
                && !ADDED_PROPS.iter().any(|(n, p, _)| n == path && p == name)
            {
                problems.push(format!("{path} {name}: property QEMU does not have"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "differences from QEMU 7.2 not listed as intended:\n{}",
        problems.join("\n")
    );
}

#[test]
fn values_that_differ_are_compatible() {
    let (_, r) = reference();
    let (_, _, o) = ours_like_reference();
    // Our hcall sets are a subset of QEMU's, in QEMU's order.
    let list = |n: &Node| -> Vec<String> {
        let v = &n.at("/rtas").unwrap().props["ibm,hypertas-functions"];
        v.split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8(s.to_vec()).unwrap())
            .collect()
    };
    let (qemu, ours) = (list(&r), list(&o));
    assert_eq!(
        ours,
        [
            "hcall-pft",
            "hcall-term",
            "hcall-dabr",
            "hcall-interrupt",
            "hcall-splpar",
            "hcall-join",
            "hcall-bulk",
            "hcall-set-mode",
            "hcall-sprg0",
            "hcall-copy",
            "hcall-debug",
            "hcall-vphn"
        ]
    );
    let positions: Vec<usize> = ours
        .iter()
        .map(|f| qemu.iter().position(|q| q == f).expect(f))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "QEMU's order");

    let cell = |n: &Node, path: &str, prop: &str| {
        u32::from_be_bytes(n.at(path).unwrap().props[prop][..4].try_into().unwrap())
    };
    // RTAS is where the tree says, and the blob is the size it says.
    let base = cell(&o, "/rtas", "linux,rtas-base");
    assert_eq!(base, cell(&o, "/rtas", "linux,rtas-entry"));
    assert_eq!(cell(&o, "/rtas", "rtas-size"), 20);
    assert_eq!(
        o.at("/chosen").unwrap().props["rng-seed"].len(),
        r.at("/chosen").unwrap().props["rng-seed"].len()
    );
    let model = String::from_utf8(o.props["model"].clone()).unwrap();
    assert!(model.starts_with("IBM pSeries (emulated by "), "{model}");
}

#[test]
fn memory_reservations_cover_kernel_rtas_and_fdt() {
    let (ref_rsv, _) = reference();
    let (blob, rsv, tree) = ours_like_reference();
    for r in &ref_rsv {
        assert!(rsv.contains(r), "QEMU reserves {r:x?}; ours: {rsv:x?}");
    }
    let base = u32::from_be_bytes(
        tree.at("/rtas").unwrap().props["linux,rtas-base"][..]
            .try_into()
            .unwrap(),
    ) as u64;
    assert!(rsv.contains(&(base, 20)), "RTAS blob reserved: {rsv:x?}");
    // The FDT reserves itself: the entry that is exactly the blob's size, 1 MiB below 1 GiB.
    assert!(
        rsv.contains(&((1 << 30) - (1 << 20), blob.len() as u64)),
        "{rsv:x?}"
    );
    assert_eq!(
        u32::from_be_bytes(blob[28..32].try_into().unwrap()),
        0,
        "boot_cpuid_phys"
    );
    assert_eq!(
        u32::from_be_bytes(blob[20..24].try_into().unwrap()),
        17,
        "FDT version"
    );
}

#[test]
fn rtas_tokens_match_qemu() {
    let (_, r) = reference();
    let (_, _, o) = ours_like_reference();
    let (rr, orr) = (r.at("/rtas").unwrap(), o.at("/rtas").unwrap());
    let services = [
        "display-character",
        "get-time-of-day",
        "power-off",
        "system-reboot",
        "query-cpu-stopped-state",
        "start-cpu",
        "stop-self",
        "ibm,set-xive",
        "ibm,get-xive",
        "ibm,int-off",
        "ibm,int-on",
        "ibm,os-term",
    ];
    for s in services {
        assert_eq!(orr.props.get(s), rr.props.get(s), "token of {s}");
        assert!(orr.props.contains_key(s), "{s} offered");
    }
    assert!(orr.props.contains_key("ibm,extended-os-term"));
}

#[test]
fn n_cpus_numbered_like_qemu() {
    let k = tiny_kernel(0x100);
    let blob = dump(&["-smp", "5", "-m", "2G", "-kernel", k.to_str().unwrap()]);
    let (_, t) = read_blob(&blob);
    let cpus = t.at("/cpus").unwrap();
    assert_eq!(cpus.children.len(), 5);
    for i in 0..5u32 {
        let c = cpus
            .children
            .get(&format!("PowerPC,POWER8@{i:x}"))
            .unwrap_or_else(|| panic!("cpu {i}"));
        assert_eq!(c.props["reg"], i.to_be_bytes());
        assert_eq!(c.props["ibm,ppc-interrupt-server#s"], i.to_be_bytes());
        assert_eq!(
            c.props["ibm,pft-size"],
            [0, 0, 0, 0, 0, 0, 0, 24],
            "2 GiB → 2^24-byte HPT"
        );
        assert_eq!(c.props["device_type"], b"cpu\0");
    }
    let icp = t.at("/interrupt-controller").unwrap();
    assert_eq!(
        icp.props["ibm,interrupt-server-ranges"],
        [0, 0, 0, 0, 0, 0, 0, 5]
    );
    let lrdr = &t.at("/rtas").unwrap().props["ibm,lrdr-capacity"];
    assert_eq!(lrdr[16..20], 5u32.to_be_bytes());
    let mem = &t.at("/memory@0").unwrap().props["reg"];
    assert_eq!(mem[..], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0]);
}

#[test]
fn qemu_dumpdtb_spelling_and_initrd() {
    let k = tiny_kernel(0x100);
    let initrd = scratch("initrd.img");
    std::fs::write(&initrd, vec![0xab; 5000]).unwrap();
    let out = scratch("qemu-spelling.dtb");
    let st = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .args([
            "-M",
            &format!("pseries,dumpdtb={}", out.display()),
            "-kernel",
            k.to_str().unwrap(),
            "-initrd",
        ])
        .arg(&initrd)
        .args(["-append", "console=hvc0 rdinit=/bin/sh"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let blob = std::fs::read(&out).unwrap();
    let f = fdt::Fdt::new(&blob).unwrap();
    assert_eq!(f.chosen().bootargs(), Some("console=hvc0 rdinit=/bin/sh"));
    let chosen = f.find_node("/chosen").unwrap();
    let start = chosen
        .property("linux,initrd-start")
        .unwrap()
        .as_usize()
        .unwrap() as u64;
    let end = chosen
        .property("linux,initrd-end")
        .unwrap()
        .as_usize()
        .unwrap() as u64;
    assert_eq!(end - start, 5000);
    assert_eq!(start % 0x10000, 0);
    assert!(start >= 0x400000 + 0x100 + 0x10000, "above the kernel");
    assert!(
        f.memory_reservations()
            .any(|r| r.address() as u64 == start && r.size() == 5000)
    );
    let stdout = chosen
        .property("linux,stdout-path")
        .unwrap()
        .as_str()
        .unwrap();
    let vty = f.find_node(stdout).expect("stdout-path resolves");
    assert_eq!(
        vty.property("compatible").unwrap().as_str(),
        Some("hvterm1")
    );
    assert_eq!(vty.property("reg").unwrap().as_usize(), Some(0x7100_0000));
    // The vty's interrupt, edge (message-signalled), so that Linux's hvc driver reads on it
    // instead of polling H_GET_TERM_CHAR.
    let cells: Vec<usize> = vty
        .property("interrupts")
        .expect("the vty advertises its interrupt")
        .value
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()) as usize)
        .collect();
    assert_eq!(cells, [0x1100, 0]);
}

/// `dtc` decodes our blob to the same tree the `fdt` crate reads (where dtc is installed).
#[test]
fn dtc_agrees() {
    if Command::new("dtc").arg("--version").output().is_err() {
        eprintln!("dtc not installed: skipped");
        return;
    }
    let (blob, rsv, tree) = ours_like_reference();
    let file = scratch("for-dtc.dtb");
    std::fs::write(&file, &blob).unwrap();
    let out = Command::new("dtc")
        .args(["-I", "dtb", "-O", "dts", "-o", "-"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dtc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (drsv, dtree) = parse_dts(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(drsv, rsv);
    assert_eq!(dtree, tree);
    // And the reference compiles, so the parser above read what dtc reads.
    let reference = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pseries_data/qemu-7.2-pseries-power8-smp2.dts");
    let out = Command::new("dtc")
        .args(["-I", "dts", "-O", "dtb", "-o", "-"])
        .arg(&reference)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (rrsv, rtree) = read_blob(&out.stdout);
    let (prsv, ptree) = reference_tree();
    assert_eq!((rrsv, rtree), (prsv, ptree));
}

fn reference_tree() -> (Vec<(u64, u64)>, Node) {
    reference()
}
