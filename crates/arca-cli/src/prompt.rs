//! Asking for a password on the terminal without echoing it: the terminal is read byte by
//! byte with echo and signals off, so that Ctrl-C is seen here and the terminal is put back
//! as it was before the process exits (a prompt ended by SIGINT left echo off).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};

use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};

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
/// error. Backspace and Ctrl-U edit the line.
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
    let mut line: Vec<u8> = Vec::new();
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
            c => line.push(c),
        }
    }
    String::from_utf8(line).map(Ended::Line).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the password typed is not UTF-8",
        )
    })
}
