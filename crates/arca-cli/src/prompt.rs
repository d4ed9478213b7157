//! Asking for a password on the terminal without echoing it: the terminal is read byte by
//! byte with echo and signals off, so that Ctrl-C is seen here and the terminal is put back
//! as it was before the process exits (a prompt ended by SIGINT left echo off).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};
use zeroize::Zeroizing;

/// The terminal being prompted on and its settings before the prompt, for the handler of
/// SIGTERM and SIGHUP (-1 and null outside a prompt).
static PROMPT_TTY: AtomicI32 = AtomicI32::new(-1);
static PROMPT_SAVED: AtomicPtr<libc::termios> = AtomicPtr::new(std::ptr::null_mut());

/// The signals that end a process at its prompt from outside (ISIG is off, so the keyboard
/// sends none): their handler puts the terminal back, then dies of the signal as before.
const ENDING: [Signal; 2] = [Signal::SIGTERM, Signal::SIGHUP];

extern "C" fn restore_and_die(sig: libc::c_int) {
    let fd = PROMPT_TTY.load(Ordering::SeqCst);
    let saved = PROMPT_SAVED.load(Ordering::SeqCst);
    // SAFETY: tcsetattr, signal and raise are async-signal-safe; `saved` points to a leaked
    // termios that is never freed.
    #[allow(unsafe_code)]
    unsafe {
        if fd >= 0 && !saved.is_null() {
            libc::tcsetattr(fd, libc::TCSANOW, saved);
        }
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// While alive, SIGTERM and SIGHUP put the terminal back before they end the process; on
/// drop, their earlier actions are back.
struct EndingSignals {
    previous: Vec<(Signal, SigAction)>,
}

impl EndingSignals {
    fn install(tty: &File, saved: &Termios) -> EndingSignals {
        // One small leak per prompt: the handler may read it at any moment.
        let saved: &'static mut libc::termios = Box::leak(Box::new(saved.clone().into()));
        PROMPT_SAVED.store(saved, Ordering::SeqCst);
        PROMPT_TTY.store(tty.as_raw_fd(), Ordering::SeqCst);
        let action = SigAction::new(
            SigHandler::Handler(restore_and_die),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        let mut previous = Vec::new();
        for sig in ENDING {
            // SAFETY: the handler only calls async-signal-safe functions.
            #[allow(unsafe_code)]
            if let Ok(old) = unsafe { signal::sigaction(sig, &action) } {
                previous.push((sig, old));
            }
        }
        EndingSignals { previous }
    }
}

impl Drop for EndingSignals {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: puts back the action that was there before `install`.
            #[allow(unsafe_code)]
            let _ = unsafe { signal::sigaction(*sig, old) };
        }
        PROMPT_TTY.store(-1, Ordering::SeqCst);
    }
}

/// Puts the terminal's settings back when dropped.
struct Restore<'a> {
    tty: &'a File,
    saved: Termios,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(self.tty, SetArg::TCSANOW, &self.saved);
    }
}

/// What ended a line read from the terminal.
enum Ended {
    Line(String),
    Interrupted,
    EndOfInput,
}

/// Prints `question` on the terminal and reads a line without echoing it. Ctrl-C puts the
/// terminal back and exits with code 130, as restic does; Ctrl-D on an empty line is an
/// error. Backspace and Ctrl-U edit the line. SIGTERM and SIGHUP also put the terminal back
/// before they end the process.
pub fn password(question: &str) -> io::Result<String> {
    let mut tty = OpenOptions::new().read(true).write(true).open("/dev/tty")?;
    let saved = termios::tcgetattr(&tty).map_err(io::Error::from)?;
    let mut quiet = saved.clone();
    quiet
        .local_flags
        .remove(LocalFlags::ECHO | LocalFlags::ICANON | LocalFlags::ISIG);
    quiet.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
    quiet.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
    tty.write_all(question.as_bytes())?;
    tty.flush()?;
    let ended = {
        let _signals = EndingSignals::install(&tty, &saved);
        termios::tcsetattr(&tty, SetArg::TCSANOW, &quiet).map_err(io::Error::from)?;
        let _restore = Restore {
            tty: &tty,
            saved: saved.clone(),
        };
        read_line(&tty)
    };
    let _ = tty.write_all(b"\n");
    match ended? {
        Ended::Line(l) => Ok(l),
        Ended::EndOfInput => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "no password typed (end of input)",
        )),
        Ended::Interrupted => std::process::exit(130),
    }
}

/// Reads bytes up to Enter, applying the editing keys.
fn read_line(mut tty: &File) -> io::Result<Ended> {
    // Every copy of the typed bytes is wiped: the buffer when dropped, and the smaller
    // buffers it outgrew as it grew.
    let mut line = Zeroizing::new(Vec::with_capacity(256));
    let mut b = [0u8; 1];
    loop {
        if tty.read(&mut b)? == 0 {
            return Ok(Ended::EndOfInput);
        }
        match b[0] {
            b'\n' | b'\r' => break,
            0x03 => return Ok(Ended::Interrupted),
            0x04 if line.is_empty() => return Ok(Ended::EndOfInput),
            0x04 => break,
            // Backspace: one character, however many bytes it took.
            0x7f | 0x08 => {
                while let Some(last) = line.pop() {
                    if last & 0xC0 != 0x80 {
                        break;
                    }
                }
            }
            0x15 => line.clear(),
            c => crate::util::extend_secret(&mut line, &[c]),
        }
    }
    let not_utf8 = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the password typed is not UTF-8",
        )
    };
    // Checked on the slice first: the error of a failed conversion would hold (and drop
    // unwiped) the bytes.
    if std::str::from_utf8(&line).is_err() {
        return Err(not_utf8());
    }
    String::from_utf8(std::mem::take(&mut *line))
        .map(Ended::Line)
        .map_err(|_| not_utf8())
}
