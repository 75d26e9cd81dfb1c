//! A small volume of its own for a test: a tmpfs mounted on a temporary directory, which the test
//! can fill for real and then grow (`mount -o remount,size=`), unmounted when dropped. Mounting
//! needs root (CAP_SYS_ADMIN); where it is refused, [`SmallVolume::mount`] says why and the test
//! that needs it stops there.

use std::path::Path;
use std::process::Command;

pub struct SmallVolume {
    dir: tempfile::TempDir,
}

impl SmallVolume {
    /// A tmpfs of `mib` MiB, or why none could be mounted.
    pub fn mount(mib: u32) -> Result<SmallVolume, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        mount(
            &["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"],
            dir.path(),
        )?;
        Ok(SmallVolume { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Grows (or shrinks) the volume to `mib` MiB, keeping its files.
    pub fn resize(&self, mib: u32) {
        mount(
            &["-o", &format!("remount,size={mib}m"), "tmpfs"],
            self.path(),
        )
        .unwrap_or_else(|e| panic!("resizing the test volume: {e}"));
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        // Lazy: a process of the test that still holds a file must not keep the mount.
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

fn mount(args: &[&str], dir: &Path) -> Result<(), String> {
    let out = Command::new("mount")
        .args(args)
        .arg(dir)
        .output()
        .map_err(|e| format!("mount: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "mount {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
