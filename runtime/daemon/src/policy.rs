//! Who may do what on which tag (docs/design.md §7, "on a host").
//!
//! Clients are known by the uid and groups the kernel reports for their
//! socket (`SO_PEERCRED`, and the process's supplementary groups). Each tag
//! created on this node has an owner, its creator's uid; a tag first heard of
//! from another node is owned by the daemon's own user. A right is granted
//! when one of these holds, in this order:
//!
//! 1. the client is root or runs as the daemon's own user, or owns the tag
//!    (a tag not created yet has no owner but the daemon's user);
//! 2. a rule of the policy file (`tagwire daemon --policy FILE`) whose tag
//!    pattern matches names the client's uid or one of its groups and the
//!    right;
//! 3. without a policy file: the client is in the shared group
//!    (`--shared-group NAME`).
//!
//! Creating a tag that exists already changes nothing and needs no right.
//!
//! ```toml
//! [[grant]]
//! tags = "/robot/**"            # `**`: any number of path segments, `*`: within one
//! users = ["alice", 1001]       # names or numbers
//! groups = ["robots"]
//! rights = ["publish", "subscribe", "create", "destroy"]
//! ```
//!
//! Listing tags and members is open to every client that can connect (the
//! socket's directory bounds who can).

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use tagwire_wire::TagName;

/// A right on a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Right {
    /// Send access.
    Publish,
    /// Subscriptions and pulls of its history.
    Subscribe,
    /// Creating it (and keeping its history).
    Create,
    /// Destroying it.
    Destroy,
}

impl fmt::Display for Right {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Right::Publish => "publish on",
            Right::Subscribe => "subscribe to",
            Right::Create => "create",
            Right::Destroy => "destroy",
        })
    }
}

/// Who a client is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cred {
    /// Its user id.
    pub uid: u32,
    /// Its primary and supplementary group ids.
    pub gids: Vec<u32>,
}

/// A user or group named in the policy file, by name or number.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Id {
    Number(u32),
    Name(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantFile {
    tags: String,
    #[serde(default)]
    users: Vec<Id>,
    #[serde(default)]
    groups: Vec<Id>,
    rights: Vec<Right>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    grant: Vec<GrantFile>,
}

#[derive(Debug, Clone)]
struct Grant {
    pattern: Vec<String>,
    text: String,
    users: Vec<u32>,
    groups: Vec<u32>,
    rights: Vec<Right>,
}

/// The rules a daemon applies.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The policy file's rules (`None`: no file).
    grants: Option<Vec<Grant>>,
    /// Where they came from, for messages.
    source: String,
    /// The daemon's own uid.
    daemon_uid: u32,
    /// `--shared-group`, when no file is given.
    shared_gid: Option<u32>,
}

/// Resolves user and group names (`getpwnam`/`getgrnam`).
pub trait Names {
    /// The uid of user `name`.
    fn uid(&self, name: &str) -> Option<u32>;
    /// The gid of group `name`.
    fn gid(&self, name: &str) -> Option<u32>;
}

/// The system's user and group database.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemNames;

impl Names for SystemNames {
    fn uid(&self, name: &str) -> Option<u32> {
        uzers::get_user_by_name(name).map(|u| u.uid())
    }

    fn gid(&self, name: &str) -> Option<u32> {
        uzers::get_group_by_name(name).map(|g| g.gid())
    }
}

impl Policy {
    /// No file: root, owners, the daemon's user and the shared group.
    pub fn open(daemon_uid: u32, shared_gid: Option<u32>) -> Self {
        Self {
            grants: None,
            source: String::new(),
            daemon_uid,
            shared_gid,
        }
    }

    /// The rules of policy file `text` (read from `source`).
    pub fn parse(
        text: &str,
        source: &str,
        daemon_uid: u32,
        names: &dyn Names,
    ) -> Result<Self, String> {
        let file: PolicyFile =
            toml::from_str(text).map_err(|e| format!("policy file {source}: {e}"))?;
        let mut grants = Vec::new();
        for (i, g) in file.grant.into_iter().enumerate() {
            let at = |what: &str| format!("policy file {source}, grant {}: {what}", i + 1);
            if !g.tags.starts_with('/') {
                return Err(at(&format!("tag pattern {:?} must start with /", g.tags)));
            }
            let resolve = |ids: &[Id], group: bool| -> Result<Vec<u32>, String> {
                ids.iter()
                    .map(|id| match id {
                        Id::Number(n) => Ok(*n),
                        Id::Name(n) => {
                            let found = if group { names.gid(n) } else { names.uid(n) };
                            found.ok_or_else(|| {
                                at(&format!(
                                    "no {} named {n:?}",
                                    if group { "group" } else { "user" }
                                ))
                            })
                        }
                    })
                    .collect()
            };
            grants.push(Grant {
                pattern: segments(&g.tags).map(str::to_owned).collect(),
                text: g.tags.clone(),
                users: resolve(&g.users, false)?,
                groups: resolve(&g.groups, true)?,
                rights: g.rights,
            });
        }
        Ok(Self {
            grants: Some(grants),
            source: source.to_owned(),
            daemon_uid,
            shared_gid: None,
        })
    }

    /// Reads and parses the policy file at `path`.
    pub fn load(path: &Path, daemon_uid: u32) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("policy file {}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string(), daemon_uid, &SystemNames)
    }

    /// Whether `who` may do `right` on `tag` (owned by `owner`, `None` for a
    /// tag from another node or not created yet); the refusal says why and
    /// what would grant it.
    pub fn check(
        &self,
        who: &Cred,
        owner: Option<u32>,
        tag: &TagName,
        right: Right,
    ) -> Result<(), String> {
        let owner = owner.unwrap_or(self.daemon_uid);
        if who.uid == 0 || who.uid == self.daemon_uid || who.uid == owner {
            return Ok(());
        }
        match &self.grants {
            Some(grants) => {
                let granted = grants.iter().any(|g| {
                    g.rights.contains(&right)
                        && matches(&g.pattern, tag.as_str())
                        && (g.users.contains(&who.uid)
                            || who.gids.iter().any(|gid| g.groups.contains(gid)))
                });
                if granted {
                    return Ok(());
                }
                let near: Vec<&str> = grants
                    .iter()
                    .filter(|g| matches(&g.pattern, tag.as_str()))
                    .map(|g| g.text.as_str())
                    .collect();
                Err(format!(
                    "uid {} may not {right} tag {tag}: no grant of {} gives it that right \
                     (rules for this tag: {}; its owner is uid {owner}); ask the owner or add a [[grant]]",
                    who.uid,
                    self.source,
                    if near.is_empty() { "none".to_owned() } else { near.join(", ") },
                ))
            }
            None => {
                if self.shared_gid.is_some_and(|g| who.gids.contains(&g)) {
                    return Ok(());
                }
                Err(format!(
                    "uid {} may not {right} tag {tag}: it is uid {owner}'s and this daemon (uid {}) \
                     has no policy file; start it with --shared-group GROUP or --policy FILE to grant it",
                    who.uid, self.daemon_uid,
                ))
            }
        }
    }
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

/// Whether the pattern's segments match `name`: `**` any number of segments,
/// `*` any characters within one.
fn matches(pattern: &[String], name: &str) -> bool {
    let name: Vec<&str> = segments(name).collect();
    matches_from(pattern, &name)
}

fn matches_from(pattern: &[String], name: &[&str]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((p, rest)) if p == "**" => (0..=name.len()).any(|k| matches_from(rest, &name[k..])),
        Some((p, rest)) => name
            .split_first()
            .is_some_and(|(n, more)| glob(p.as_bytes(), n.as_bytes()) && matches_from(rest, more)),
    }
}

/// `*` matches any run of bytes; everything else itself.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|k| glob(rest, &s[k..])),
        Some((c, rest)) => s
            .split_first()
            .is_some_and(|(d, more)| c == d && glob(rest, more)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake;
    impl Names for Fake {
        fn uid(&self, name: &str) -> Option<u32> {
            (name == "alice").then_some(1001)
        }
        fn gid(&self, name: &str) -> Option<u32> {
            (name == "robots").then_some(500)
        }
    }

    fn tag(n: &str) -> TagName {
        TagName::new(n).unwrap()
    }

    fn cred(uid: u32, gids: &[u32]) -> Cred {
        Cred {
            uid,
            gids: gids.to_vec(),
        }
    }

    #[test]
    fn patterns_match_segments_and_globs() {
        let p = |s: &str| segments(s).map(str::to_owned).collect::<Vec<_>>();
        assert!(matches(&p("/robot/**"), "/robot"));
        assert!(matches(&p("/robot/**"), "/robot/arm/joint3"));
        assert!(!matches(&p("/robot/**"), "/robots/x"));
        assert!(matches(&p("/robot/*/pose"), "/robot/arm/pose"));
        assert!(!matches(&p("/robot/*/pose"), "/robot/arm/x/pose"));
        assert!(matches(&p("/cam*/raw"), "/camera/raw"));
        assert!(matches(&p("/**/raw"), "/a/b/raw"));
        assert!(!matches(&p("/a"), "/a/b"));
    }

    #[test]
    fn without_a_file_root_owner_daemon_user_and_shared_group_may() {
        let p = Policy::open(1000, Some(500));
        let t = tag("/x");
        assert!(
            p.check(&cred(0, &[]), Some(7), &t, Right::Destroy).is_ok(),
            "root"
        );
        assert!(
            p.check(&cred(7, &[]), Some(7), &t, Right::Destroy).is_ok(),
            "owner"
        );
        assert!(
            p.check(&cred(1000, &[]), Some(7), &t, Right::Publish)
                .is_ok(),
            "daemon's user"
        );
        assert!(
            p.check(&cred(9, &[500]), Some(7), &t, Right::Subscribe)
                .is_ok(),
            "shared group"
        );
        let e = p
            .check(&cred(9, &[9]), Some(7), &t, Right::Subscribe)
            .unwrap_err();
        assert!(
            e.contains("uid 9 may not subscribe to tag /x") && e.contains("--shared-group"),
            "{e}"
        );
        // A tag from another node is the daemon user's.
        assert!(p.check(&cred(9, &[9]), None, &t, Right::Publish).is_err());
        let closed = Policy::open(1000, None);
        assert!(closed
            .check(&cred(9, &[500]), None, &t, Right::Create)
            .is_err());
    }

    #[test]
    fn a_policy_file_grants_rights_per_pattern_to_users_and_groups() {
        let text = r#"
            [[grant]]
            tags = "/robot/**"
            groups = ["robots"]
            rights = ["subscribe"]

            [[grant]]
            tags = "/robot/cmd"
            users = ["alice", 1002]
            rights = ["publish", "create"]
        "#;
        let p = Policy::parse(text, "test.toml", 0, &Fake).unwrap();
        let (cmd, pose) = (tag("/robot/cmd"), tag("/robot/pose"));
        assert!(p
            .check(&cred(33, &[500]), None, &pose, Right::Subscribe)
            .is_ok());
        assert!(p
            .check(&cred(33, &[500]), None, &pose, Right::Publish)
            .is_err());
        assert!(p
            .check(&cred(1001, &[1001]), None, &cmd, Right::Publish)
            .is_ok());
        assert!(p.check(&cred(1002, &[]), None, &cmd, Right::Create).is_ok());
        let e = p
            .check(&cred(1002, &[]), None, &cmd, Right::Destroy)
            .unwrap_err();
        assert!(
            e.contains("test.toml") && e.contains("/robot/**, /robot/cmd"),
            "{e}"
        );
        // The owner keeps its rights (keeping a history is `create`);
        // creating a new tag needs a grant.
        assert!(p
            .check(&cred(44, &[]), Some(44), &pose, Right::Destroy)
            .is_ok());
        assert!(p
            .check(&cred(44, &[]), Some(44), &pose, Right::Create)
            .is_ok());
        assert!(p
            .check(&cred(44, &[]), None, &tag("/new"), Right::Create)
            .is_err());
    }

    #[test]
    fn bad_policy_files_are_refused_with_the_place() {
        for (text, says) in [
            (
                "[[grant]]\ntags = \"robot\"\nrights = [\"publish\"]",
                "must start with /",
            ),
            (
                "[[grant]]\ntags = \"/r\"\nusers = [\"bob\"]\nrights = [\"publish\"]",
                "no user named \"bob\"",
            ),
            ("[[grant]]\ntags = \"/r\"\nrights = [\"fly\"]", "fly"),
            ("[[grant]]\ntags = \"/r\"\nrights = []\nextra = 1", "extra"),
        ] {
            let e = Policy::parse(text, "p.toml", 0, &Fake).unwrap_err();
            assert!(e.contains("p.toml") && e.contains(says), "{text}: {e}");
        }
    }
}
