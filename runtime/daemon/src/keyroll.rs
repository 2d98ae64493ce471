//! Domain key rolls (docs/design.md §7, "Between hosts"): a daemon started
//! with a key file (`NetConfig::key_file`) reads it again whenever it
//! changes and moves its keys as the file says (`tagwire_auth::KeyFile`):
//! once the file names a next key both keys open, at the switch time the
//! next one seals, a grace later the old one opens nothing more. Links
//! already up keep their session keys (Noise's ephemeral keys, not the
//! pre-shared key, protect them); new ones take either key during the roll.
//! Datagrams say their key's generation, so nothing is tried twice and
//! nothing sealed under either key is lost across the switch; this node's
//! direct receivers are handed their holdings' keys of each generation,
//! and publishers see the switch in their send ticket and ask for theirs.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tagwire_auth::KeyFile;

use crate::guard::{read_key_roll, Keys};
use crate::Shared;

/// How often the file and the clock are looked at: a switch takes effect
/// within this of its time.
const CHECK: Duration = Duration::from_millis(100);

/// What identifies a version of the file without reading it.
type Stamp = Option<(i64, i64, u64, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.mtime(), m.mtime_nsec(), m.len(), m.ino()))
}

fn unix_now() -> u64 {
    crate::now_unix_ns() / 1_000_000_000
}

/// The file's roll as this daemon follows it.
pub(crate) struct Watch {
    path: PathBuf,
    stamp: Stamp,
    file: Option<KeyFile>,
}

impl Watch {
    /// Reads the file again if it changed; a file that cannot be read or
    /// parsed leaves the keys as they are (said once per version).
    fn refresh(&mut self) {
        let now = stamp(&self.path);
        if now == self.stamp {
            return;
        }
        self.stamp = now;
        match read_key_roll(&self.path) {
            Ok(f) => {
                if self.file.as_ref() != Some(&f) {
                    match &f.next {
                        Some((k, at)) => tracing::info!(
                            path = %self.path.display(),
                            generation = f.current.generation(),
                            next = k.generation(),
                            switch_at = at,
                            "key file: a key roll"
                        ),
                        None => tracing::info!(
                            path = %self.path.display(),
                            generation = f.current.generation(),
                            "key file read"
                        ),
                    }
                }
                self.file = Some(f);
            }
            Err(e) => tracing::warn!(error = %e, "key file not used; the keys stay as they are"),
        }
    }

    /// Moves the daemon's keys to what the file says now.
    fn apply(&self, shared: &Shared) {
        let Some(f) = &self.file else { return };
        let keys = Keys::at(f, unix_now());
        let (generation, accepted) = (
            keys.active.generation(),
            keys.accepted
                .iter()
                .map(|k| k.generation())
                .collect::<Vec<_>>(),
        );
        if let Some(before) = shared.guard.roll_to(keys) {
            tracing::info!(
                sealing = generation,
                ?accepted,
                before = before.active.generation(),
                "domain keys moved"
            );
            if let Some(d) = shared.delivery.get() {
                let st = shared.lock();
                d.direct.rekey(&st, &shared.guard);
            }
        }
    }
}

/// Applies `path`'s keys now (before any link is made: a daemon started
/// during or after a roll uses the file's keys from its first handshake).
pub(crate) fn prepare(shared: &Shared, path: PathBuf) -> Watch {
    let mut w = Watch {
        stamp: None,
        file: None,
        path,
    };
    w.refresh();
    w.apply(shared);
    w
}

/// Follows the file on a thread of its own until the daemon stops.
pub(crate) fn start(shared: &Arc<Shared>, mut w: Watch) -> std::io::Result<()> {
    let weak: Weak<Shared> = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("tagwired-keys".into())
        .spawn(move || loop {
            std::thread::sleep(CHECK);
            let Some(shared) = weak.upgrade() else { return };
            if shared.stopping.load(Ordering::Relaxed) {
                return;
            }
            w.refresh();
            w.apply(&shared);
        })
        .map(|_| ())
}
