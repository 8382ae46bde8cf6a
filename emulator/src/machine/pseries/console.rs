//! The hvterm console (`/vdevice/vty@71000000`, "hvterm1"): H_PUT_TERM_CHAR writes to the
//! host's stdout, H_GET_TERM_CHAR reads from an input queue that the I/O thread fills from
//! stdin. Input that arrives while the queue is empty fires the vty's interrupt
//! ([`VTY_IRQ`], a message-signalled XICS source, as QEMU's vty does), so Linux's hvc driver
//! reads on the interrupt instead of polling H_GET_TERM_CHAR on a timer (which it does for a
//! vty without `interrupts`).

use std::collections::VecDeque;
use std::io::Write;

/// Terminal number of the one vty: its `reg`, the same as QEMU's first VIO device.
pub const VTY_REG: u32 = 0x7100_0000;

/// The vty's interrupt source: the first VIO source of QEMU's pseries (its tree says
/// `interrupts = <0x1100 0>`, 0 meaning edge: a message-signalled source).
pub const VTY_IRQ: u32 = super::xics::IRQ_BASE + 0x100;

/// Most characters one H_PUT_TERM_CHAR / H_GET_TERM_CHAR moves (two registers).
pub const MAX_CHARS: usize = 16;

/// Input side of the hvterm.
#[derive(Debug, Default)]
pub struct HvTerm {
    input: VecDeque<u8>,
}

impl HvTerm {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues bytes typed on the host (I/O thread).
    pub fn push_input(&mut self, bytes: &[u8]) {
        self.input.extend(bytes);
    }

    /// Takes up to [`MAX_CHARS`] queued bytes.
    pub fn take_input(&mut self) -> Vec<u8> {
        let n = self.input.len().min(MAX_CHARS);
        self.input.drain(..n).collect()
    }

    pub fn pending_input(&self) -> usize {
        self.input.len()
    }
}

/// Packs up to 16 bytes into two registers, first byte most significant (PAPR's layout).
pub fn pack_chars(bytes: &[u8]) -> (u64, u64) {
    let mut buf = [0u8; MAX_CHARS];
    let n = bytes.len().min(MAX_CHARS);
    buf[..n].copy_from_slice(&bytes[..n]);
    (
        u64::from_be_bytes(buf[..8].try_into().unwrap()),
        u64::from_be_bytes(buf[8..].try_into().unwrap()),
    )
}

/// The first `len` (≤ 16) bytes packed in two registers by [`pack_chars`].
pub fn unpack_chars(hi: u64, lo: u64, len: usize) -> Vec<u8> {
    let mut buf = [0u8; MAX_CHARS];
    buf[..8].copy_from_slice(&hi.to_be_bytes());
    buf[8..].copy_from_slice(&lo.to_be_bytes());
    buf[..len.min(MAX_CHARS)].to_vec()
}

/// Writes console output to the host's stdout, flushed at once so that output interleaves
/// correctly with the emulator's own messages and reaches a pipe before a hang or a kill.
pub fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (e.g. `| head`) must not stop the guest.
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

/// Reads `input` on a thread of its own and hands every chunk to `deliver` (which queues it
/// with [`HvTerm::push_input`] under the BQL). Ends at end of file or on a read error, so a
/// run without stdin (CI) costs nothing.
pub fn spawn_input_reader<R, F>(
    mut input: R,
    mut deliver: F,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    R: std::io::Read + Send + 'static,
    F: FnMut(&[u8]) + Send + 'static,
{
    std::thread::Builder::new()
        .name("hvterm-input".into())
        .spawn(move || {
            let mut buf = [0u8; 256];
            loop {
                match input.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => deliver(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        })
}

/// Where the hvterm's output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Console {
    /// To stdout, as written (the command line).
    Stdout,
    /// Kept in memory and returned with the outcome (tests).
    Capture,
}

/// The hvterm's output side: the bytes go where [`Console`] says, and line by line to the
/// observers of the run (its result line).
pub struct ConsoleSink {
    to: Console,
    captured: Vec<u8>,
    lines: ConsoleLines,
}

impl ConsoleSink {
    pub fn new(to: Console, lines: ConsoleLines) -> Self {
        Self {
            to,
            captured: Vec::new(),
            lines,
        }
    }

    /// Output written by the guest.
    pub fn write(&mut self, bytes: &[u8]) {
        match self.to {
            Console::Stdout => write_stdout(bytes),
            Console::Capture => self.captured.extend_from_slice(bytes),
        }
        self.lines.feed(bytes);
    }

    /// The output kept so far (empty unless [`Console::Capture`]).
    pub fn take_captured(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.captured)
    }

    /// The result line an observer picked up.
    pub fn result_line(&self) -> Option<String> {
        self.lines.result_line()
    }
}

/// Watches the guest's console output line by line (a workload's result line, a prompt).
pub trait ConsoleObserver: Send {
    /// One complete line, without its line end.
    fn line(&mut self, line: &str);
    /// The result line this observer picked up, if it looks for one.
    fn result_line(&self) -> Option<&str> {
        None
    }
}

/// Lines longer than this are cut (a guest printing without line ends must not grow memory).
const MAX_LINE: usize = 4096;

/// Splits console output into lines for its observers.
#[derive(Default)]
pub struct ConsoleLines {
    line: Vec<u8>,
    observers: Vec<Box<dyn ConsoleObserver>>,
}

impl ConsoleLines {
    pub fn new(observers: Vec<Box<dyn ConsoleObserver>>) -> Self {
        Self {
            line: Vec::new(),
            observers,
        }
    }

    /// Console output as written by the guest.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &c in bytes {
            if c == b'\n' {
                let line = String::from_utf8_lossy(&self.line);
                for o in &mut self.observers {
                    o.line(line.trim_end());
                }
                self.line.clear();
            } else if self.line.len() < MAX_LINE {
                self.line.push(c);
            }
        }
    }

    /// The result line of the first observer that has one.
    pub fn result_line(&self) -> Option<String> {
        self.observers
            .iter()
            .find_map(|o| o.result_line())
            .map(str::to_string)
    }
}

/// Keeps the last line that starts with `prefix`: the result line of a workload.
pub struct ResultLine {
    prefix: &'static str,
    last: Option<String>,
}

/// Prefix of the bundled guest's result line.
pub const MKBENCH_RESULT: &str = "MKBENCH-RESULT";

impl ResultLine {
    pub fn new(prefix: &'static str) -> Self {
        Self { prefix, last: None }
    }
}

impl ConsoleObserver for ResultLine {
    fn line(&mut self, line: &str) {
        if line.starts_with(self.prefix) {
            self.last = Some(line.to_string());
        }
    }
    fn result_line(&self) -> Option<&str> {
        self.last.as_deref()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn input_reader_delivers_until_eof() {
        let got = std::sync::Arc::new(std::sync::Mutex::new(HvTerm::new()));
        let sink = got.clone();
        let data: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let h = spawn_input_reader(std::io::Cursor::new(data.clone()), move |b| {
            sink.lock().unwrap().push_input(b)
        })
        .unwrap();
        h.join().unwrap();
        let mut term = got.lock().unwrap();
        let mut all = Vec::new();
        while term.pending_input() > 0 {
            all.extend(term.take_input());
        }
        assert_eq!(all, data);
    }

    use super::*;

    #[test]
    fn pack_roundtrip() {
        let text = b"hello, pseries!!";
        let (hi, lo) = pack_chars(text);
        assert_eq!(hi, u64::from_be_bytes(*b"hello, p"));
        assert_eq!(unpack_chars(hi, lo, 16), text);
        assert_eq!(unpack_chars(hi, lo, 3), b"hel");
        let (hi, lo) = pack_chars(b"ab");
        assert_eq!((hi, lo), (0x6162_0000_0000_0000, 0));
    }

    #[test]
    fn input_is_taken_sixteen_at_a_time() {
        let mut t = HvTerm::new();
        t.push_input(&[b'x'; 20]);
        assert_eq!(t.take_input().len(), 16);
        assert_eq!(t.take_input().len(), 4);
        assert!(t.take_input().is_empty());
    }

    #[test]
    fn result_lines_are_picked_up_across_writes() {
        let mut c = ConsoleLines::new(vec![Box::new(ResultLine::new(MKBENCH_RESULT))]);
        c.feed(b"boot\nMKBENCH-RES");
        assert_eq!(c.result_line(), None);
        c.feed(b"ULT n=1 sum=7\r\nother MKBENCH-RESULT\nMKBENCH-RESULT n=2");
        assert_eq!(c.result_line().as_deref(), Some("MKBENCH-RESULT n=1 sum=7"));
        c.feed(b"\n");
        assert_eq!(c.result_line().as_deref(), Some("MKBENCH-RESULT n=2"));
        c.feed(&[b'x'; 2 * MAX_LINE]);
        c.feed(b"\n");
        assert_eq!(c.result_line().as_deref(), Some("MKBENCH-RESULT n=2"));
    }
}
