//! `arca completions` and `arca man`: shell completion scripts and manual pages, generated
//! from the clap definition of the command line so they never drift from it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::cli::Cli;

/// Options of `arca completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    pub shell: Shell,
}

/// Options of `arca man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write arca.1 and one arca-COMMAND.1 page per command into this folder (created if
    /// missing) instead of printing arca.1 to stdout
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script for `a.shell`.
pub fn completions(a: &CompletionsArgs) -> Result<u8> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "arca", &mut buf);
    write_stdout(&buf)?;
    Ok(0)
}

/// Prints arca.1, or writes every page into `--dir`.
pub fn man(a: &ManArgs) -> Result<u8> {
    let mut cmd = Cli::command();
    cmd.build();
    match &a.dir {
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut buf)?;
            write_stdout(&keep_layout(buf))?;
        }
        Some(dir) => {
            if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
                anyhow::bail!("{} is a file, not a folder", arca_format::text::shown(dir));
            }
            std::fs::create_dir_all(dir).with_context(|| {
                format!("cannot create folder {}", arca_format::text::shown(dir))
            })?;
            let n = write_pages(&cmd, "arca", dir)?;
            super::out(&format!(
                "wrote {n} manual pages to {}",
                arca_format::text::shown(dir)
            ))?;
        }
    }
    Ok(0)
}

/// Writes `name.1` for `cmd` and, recursively, `name-sub.1` for its subcommands; the number
/// of pages written.
fn write_pages(cmd: &clap::Command, name: &str, dir: &Path) -> Result<usize> {
    let page = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone().name(name.to_string()))
        .render(&mut buf)
        .with_context(|| format!("cannot render {}", arca_format::text::shown(&page)))?;
    // Written beside it and renamed into place: a full disk left the page cut short (an
    // empty or truncated page that man shows as such).
    let tmp = dir.join(format!(".{name}.1.tmp-{}", std::process::id()));
    let written =
        std::fs::write(&tmp, keep_layout(buf)).and_then(|()| std::fs::rename(&tmp, &page));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow::Error::new(e)
            .context(format!("cannot write {}", arca_format::text::shown(&page))));
    }
    let mut n = 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        n += write_pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(n)
}

/// The page with its closing section (the environment and the exit codes, a table laid
/// out in spaces) printed as written: man fills paragraphs, which ran the table together.
fn keep_layout(page: Vec<u8>) -> Vec<u8> {
    const EXTRA: &str = ".SH EXTRA\n";
    let text = match String::from_utf8(page) {
        Ok(t) => t,
        Err(e) => return e.into_bytes(),
    };
    let Some(at) = text.find(EXTRA) else {
        return text.into_bytes();
    };
    let body = at + EXTRA.len();
    let end = text[body..]
        .find("\n.SH ")
        .map_or(text.len(), |i| body + i + 1);
    format!(
        "{}.SH \"ENVIRONMENT AND EXIT STATUS\"\n.nf\n{}.fi\n{}",
        &text[..at],
        &text[body..end],
        &text[end..]
    )
    .into_bytes()
}

/// Writes `b` to stdout, whose errors say that they are standard output's (a full disk behind
/// `> file` read as a bare "No space left on device").
fn write_stdout(b: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut o = super::Stdout::lock();
    o.write_all(b)?;
    o.flush()?;
    Ok(())
}
