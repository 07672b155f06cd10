//! Writes what the .deb installs besides the binary, from the same command-line definitions
//! the binary parses (`src/cli.rs`, compiled here too): one man page per subcommand
//! (clap_mangen, gzip -9 as Debian policy asks) and the bash, zsh and fish completions
//! (clap_complete). They go to `target/<profile>/assets/`, where the `target/release/` asset
//! paths of `[package.metadata.deb]` find them for whichever profile cargo-deb builds.

#[path = "src/cli.rs"]
#[allow(dead_code, unused_imports, missing_docs)]
mod cli;

use clap::CommandFactory;
use std::io::Write;
use std::path::{Path, PathBuf};

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=src/cli.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return Err(std::io::Error::other("cargo did not set OUT_DIR"));
    };
    // OUT_DIR is <target>/<profile>/build/irqpilot-<hash>/out.
    let Some(profile_dir) = out.ancestors().nth(3) else {
        return Err(std::io::Error::other("unexpected OUT_DIR layout"));
    };
    let assets = profile_dir.join("assets");
    man_pages(&assets.join("man"))?;
    completions(&assets.join("completions"))
}

/// `irqpilot.1.gz`, `irqpilot-status.1.gz`, ... `irqpilot-fixture-generate.1.gz`.
fn man_pages(dir: &Path) -> std::io::Result<()> {
    let plain = dir.join("plain");
    if plain.exists() {
        std::fs::remove_dir_all(&plain)?;
    }
    std::fs::create_dir_all(&plain)?;
    clap_mangen::generate_to(cli::Cli::command(), &plain)?;
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "gz") {
            std::fs::remove_file(p)?;
        }
    }
    for entry in std::fs::read_dir(&plain)? {
        let p = entry?.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let text = std::fs::read(&p)?;
        // mtime 0 in the header: the same page gives the same bytes.
        let mut gz = flate2::GzBuilder::new().mtime(0).write(
            std::fs::File::create(dir.join(format!("{name}.gz")))?,
            flate2::Compression::best(),
        );
        gz.write_all(&text)?;
        gz.finish()?;
    }
    std::fs::remove_dir_all(&plain)
}

/// `irqpilot.bash`, `_irqpilot` (zsh), `irqpilot.fish`.
fn completions(dir: &Path) -> std::io::Result<()> {
    use clap_complete::Shell;
    std::fs::create_dir_all(dir)?;
    let mut cmd = cli::Cli::command();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "irqpilot", dir)?;
    }
    Ok(())
}
