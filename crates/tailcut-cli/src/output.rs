//! What the binary does with its own output streams: a reader that goes away
//! (`tailcut report … | head -1`) ends the process quietly, as it ends a Unix tool, and
//! an error is printed once with its causes, each cause once.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with `EPIPE` instead of
//! killing the process, and `println!` turns that failure into a panic (exit 101 with a
//! backtrace). Restoring SIGPIPE would also kill the gateway on a client's closed
//! socket, so instead every command's output is covered at the two places a closed pipe
//! surfaces: the panic of the print macros (a panic hook) and an error returned by an
//! explicit write (the top-level error handler, which checks that the stream really is
//! a pipe closed at the other end, so a broken *socket* is still reported).

/// Exit status when the reader of standard output or error went away: 128 + SIGPIPE,
/// what a shell reports for `seq 1 1000000 | head -1`.
pub const CLOSED_EXIT: u8 = 141;

/// Installs a panic hook that exits quietly with [`CLOSED_EXIT`] when the panic is the
/// print macros failing on a closed pipe; any other panic goes to the default hook.
pub fn exit_quietly_when_closed() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message =
            payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied()).unwrap_or("");
        if is_closed_print_panic(message) {
            std::process::exit(i32::from(CLOSED_EXIT));
        }
        default(info);
    }));
}

/// The message of `println!`/`eprintln!` failing because the reader closed the pipe.
fn is_closed_print_panic(message: &str) -> bool {
    let printing = message.starts_with("failed printing to stdout") || message.starts_with("failed printing to stderr");
    printing && message.ends_with(&broken_pipe_text())
}

#[cfg(unix)]
fn broken_pipe_text() -> String {
    std::io::Error::from_raw_os_error(rustix::io::Errno::PIPE.raw_os_error()).to_string()
}

#[cfg(not(unix))]
fn broken_pipe_text() -> String {
    std::io::Error::from(std::io::ErrorKind::BrokenPipe).to_string()
}

/// Whether `e` is a write to standard output or error whose reader went away.
pub fn closed_by_reader(e: &anyhow::Error) -> bool {
    let broken_pipe = e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe));
    broken_pipe && (stream_closed(&std::io::stdout()) || stream_closed(&std::io::stderr()))
}

/// Whether the stream is a pipe (or socket) whose other end is closed: `poll` reports
/// an error condition on it at once.
#[cfg(unix)]
fn stream_closed(stream: &impl std::os::fd::AsFd) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(stream, PollFlags::OUT)];
    let ready = poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })).unwrap_or(0);
    ready > 0 && fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP)
}

#[cfg(not(unix))]
fn stream_closed<T>(_: &T) -> bool {
    false
}

/// The error and its causes, `: `-separated, leaving out a cause whose text its wrapper
/// already shows (`file: No such file` would otherwise print `: No such file` twice).
pub fn chain_message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

thread_local! {
    /// A command's `--json` document as the embedded API captures it instead of printing
    /// it (see [`capture_json`]): `None` while nothing is captured on this thread.
    static CAPTURED: std::cell::RefCell<Option<Option<String>>> = const { std::cell::RefCell::new(None) };
}

/// Prints a command's `--json` document (pretty-printed, one trailing newline), or,
/// inside [`capture_json`], keeps exactly that text for its caller: the Python API's
/// records are the CLI's own bytes, so the two cannot disagree.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    let kept = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(slot) => {
            *slot = Some(text.clone());
            true
        }
        None => false,
    });
    if !kept {
        println!("{text}");
    }
    Ok(())
}

/// Runs `f` with [`print_json`] capturing on this thread; returns `f`'s value and the
/// document it would have printed.
pub fn capture_json<R>(f: impl FnOnce() -> R) -> (R, Option<String>) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CAPTURED.with(|c| *c.borrow_mut() = None);
        }
    }
    CAPTURED.with(|c| *c.borrow_mut() = Some(None));
    let reset = Reset;
    let r = f();
    let text = CAPTURED.with(|c| c.borrow_mut().take().flatten());
    drop(reset);
    (r, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_its_wrappers_message_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8");
        let e = anyhow::Error::new(tailcut_replay::ReplayError::Io { file: "trace.jsonl".into(), source: io }).context("reading traces");
        assert_eq!(chain_message(&e), "reading traces: trace.jsonl: stream did not contain valid UTF-8");
        let plain = anyhow::anyhow!("refused").context("request 3");
        assert_eq!(chain_message(&plain), "request 3: refused");
    }

    #[test]
    fn only_the_print_macros_closed_pipe_panic_is_quiet() {
        assert!(is_closed_print_panic(&format!("failed printing to stdout: {}", broken_pipe_text())));
        assert!(is_closed_print_panic(&format!("failed printing to stderr: {}", broken_pipe_text())));
        assert!(!is_closed_print_panic("failed printing to stdout: No space left on device (os error 28)"));
        assert!(!is_closed_print_panic("index out of bounds"));
    }
}
