//! The systemd user unit docs/remote.md shows is one systemd accepts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::process::Command;

#[test]
fn the_documented_systemd_unit_verifies() {
    let unit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/pod@.service")).unwrap();
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/remote.md")).unwrap();
    // The unit in the docs is the file, line for line (its comments aside).
    for line in unit.lines().filter(|l| !l.starts_with('#')) {
        assert!(docs.contains(line), "docs/remote.md lacks {line:?}");
    }
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        // CI installs it (.ci/run): there, a missing program must fail the
        // test, not let it pass without checking the unit.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set, so this test may not skip: systemd-analyze is not installed"
        );
        eprintln!("skipped: systemd-analyze is not installed");
        return;
    }
    // An instance of the template, with the binary this build made (the
    // docs install it in /usr/local/bin) and a workspace that exists.
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("src/calc");
    std::fs::create_dir_all(&workspace).unwrap();
    let unit = unit
        .replace("/usr/local/bin/pod", env!("CARGO_BIN_EXE_pod"))
        .replace("%h/src/%i", &workspace.display().to_string());
    let path = dir.path().join("pod@calc.service");
    // A user manager needs a runtime directory, which a CI box may lack.
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(&path)
        .env("HOME", dir.path())
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    // Complaints about the machine's own units are not this unit's.
    let ours: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("pod@calc.service"))
        .collect();
    assert!(
        out.status.success() && ours.is_empty(),
        "systemd-analyze verify: {said}"
    );
}
