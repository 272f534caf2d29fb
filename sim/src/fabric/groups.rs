//! The multicast forwarding table of the network's switch: which hosts' ports joined which
//! IPv4 group, so that a group's datagram reaches the members on other hosts.
//!
//! On a real RoCE network a switch learns the members (IGMP snooping) and copies a group's
//! packet to each member's link. The simulated hosts are processes with UDP sockets and no
//! switch between them, so the table lives where every process of the machine sees it: a
//! directory holding one directory per group and, in it, one file per member port, named
//! `ADDRESS:UDP-PORT` and holding the member process's id. Joining writes the file, leaving
//! removes it, and a sender copies the datagram to each member of another host whose process
//! is still alive (a member whose process died without leaving is removed when seen).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};

/// The table in directory `dir`.
#[derive(Debug, Clone)]
pub struct GroupTable {
    dir: PathBuf,
}

impl GroupTable {
    /// The table in `dir`, made if missing.
    pub fn open(dir: &Path) -> io::Result<GroupTable> {
        std::fs::create_dir_all(dir)?;
        Ok(GroupTable { dir: dir.to_path_buf() })
    }

    /// The table's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn group_dir(&self, group: Ipv4Addr) -> PathBuf {
        self.dir.join(group.to_string())
    }

    fn entry(&self, group: Ipv4Addr, port: SocketAddrV4) -> PathBuf {
        self.group_dir(group).join(port.to_string())
    }

    /// Enter `port` (a host's socket) as a member of `group`, for this process.
    pub fn join(&self, group: Ipv4Addr, port: SocketAddrV4) -> io::Result<()> {
        std::fs::create_dir_all(self.group_dir(group))?;
        // Written whole under another name, then renamed: a reader never sees half an id.
        let tmp = self.group_dir(group).join(format!(".{port}.{}", std::process::id()));
        std::fs::write(&tmp, std::process::id().to_string())?;
        std::fs::rename(&tmp, self.entry(group, port))
    }

    /// Remove `port` from `group` if this process entered it (a forked child holding its
    /// parent's membership leaves the parent's entry alone).
    pub fn leave(&self, group: Ipv4Addr, port: SocketAddrV4) {
        let path = self.entry(group, port);
        if owner(&path) == Some(std::process::id()) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// The sockets of `group`'s members whose processes live, in address order; the entries
    /// of processes gone are removed.
    pub fn members(&self, group: Ipv4Addr) -> Vec<SocketAddrV4> {
        let Ok(dir) = std::fs::read_dir(self.group_dir(group)) else { return Vec::new() };
        let mut out = Vec::new();
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(port) = name.to_str().and_then(|n| n.parse::<SocketAddrV4>().ok()) else { continue };
            match owner(&e.path()) {
                Some(pid) if alive(pid) => out.push(port),
                Some(_) => {
                    let _ = std::fs::remove_file(e.path());
                }
                None => {}
            }
        }
        out.sort();
        out
    }
}

/// The process id an entry holds.
fn owner(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether process `pid` exists (signal 0 checks without sending; EPERM means it exists).
fn alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else { return false };
    if p <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing.
    unsafe { libc::kill(p, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str) -> io::Result<GroupTable> {
        let dir = std::env::temp_dir().join(format!("mlx5sim-groups-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        GroupTable::open(&dir)
    }

    #[test]
    fn members_join_and_leave_in_address_order() -> io::Result<()> {
        let t = table("order")?;
        let g = Ipv4Addr::new(239, 1, 2, 3);
        let a = SocketAddrV4::new(Ipv4Addr::new(127, 0, 151, 2), 4791);
        let b = SocketAddrV4::new(Ipv4Addr::new(127, 0, 151, 1), 4791);
        t.join(g, a)?;
        t.join(g, b)?;
        t.join(g, b)?;
        assert_eq!(t.members(g), vec![b, a]);
        assert_eq!(t.members(Ipv4Addr::new(239, 1, 2, 4)), vec![]);
        t.leave(g, b);
        assert_eq!(t.members(g), vec![a]);
        std::fs::remove_dir_all(t.dir())
    }

    #[test]
    fn an_entry_of_a_process_gone_is_skipped_and_removed_and_another_process_entry_stays() -> io::Result<()> {
        let t = table("gone")?;
        let g = Ipv4Addr::new(239, 1, 2, 5);
        let dead = SocketAddrV4::new(Ipv4Addr::new(127, 0, 151, 3), 4791);
        let other = SocketAddrV4::new(Ipv4Addr::new(127, 0, 151, 4), 4791);
        std::fs::create_dir_all(t.group_dir(g))?;
        // No process has an id this large (pid_max is at most 2^22).
        std::fs::write(t.entry(g, dead), "999999999")?;
        // Process 1 lives (init); this process did not make the entry, so it cannot leave it.
        std::fs::write(t.entry(g, other), "1")?;
        std::fs::write(t.group_dir(g).join("not-an-address"), "1")?;
        assert_eq!(t.members(g), vec![other]);
        assert!(!t.entry(g, dead).exists(), "the dead member's entry is removed");
        t.leave(g, other);
        assert_eq!(t.members(g), vec![other]);
        std::fs::remove_dir_all(t.dir())
    }
}
