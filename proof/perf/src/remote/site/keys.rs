//! A keyed site's domain key files, one per host, and their key rolls
//! (the soak's `key-roll` fault).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tagwire_daemon::KeyFile;

use super::Site;

impl Site {
    /// Host `i`'s copy of the domain key file (keyed sites).
    pub fn key_file(&self, i: usize) -> PathBuf {
        self.dir.join(format!("h{i}.key"))
    }

    /// Starts a key roll on every node of a keyed site: a new random key,
    /// switched to in `switch_in` (the same file copied to every host).
    /// Returns the new key's generation.
    pub fn roll_key(&self, switch_in: Duration) -> anyhow::Result<u32> {
        let file = tagwire_daemon::read_key_roll(&self.key_file(0))?;
        let mut bytes = [0u8; tagwire_daemon::DOMAIN_KEY_LEN];
        getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        // (Whole seconds: the switch comes within a second of `switch_in`.)
        let at = now + switch_in.as_secs().max(1);
        let rolled = file.roll(bytes, at, now);
        let generation = rolled.next.as_ref().map_or(0, |(k, _)| k.generation());
        for i in 0..self.lan.hosts().len() {
            tagwire_daemon::write_key_file(&self.key_file(i), &rolled)?;
        }
        Ok(generation)
    }

    /// Ends a key roll on every node at once: the files name the new key
    /// alone (what the grace would do a minute after the switch).
    pub fn finish_roll(&self) -> anyhow::Result<()> {
        let file = tagwire_daemon::read_key_roll(&self.key_file(0))?;
        let Some((next, _)) = file.next else {
            return Ok(());
        };
        let done = KeyFile {
            current: next,
            next: None,
        };
        for i in 0..self.lan.hosts().len() {
            tagwire_daemon::write_key_file(&self.key_file(i), &done)?;
        }
        Ok(())
    }
}
