//! The port as the firmware sees it: an administrative state (ACCESS_REG of the PAOS
//! register), a link state (the cable, [`crate::device::Device::port_changed`]) and the
//! operational state they make together, with QUERY_HCA_VPORT_CONTEXT and MAD_IFC's
//! PortInfo reporting it. A change of the operational state posts a PORT_STATE_CHANGE event
//! and is kept for the provider, which moves the port's attributes and tells kernel contexts.

use mlx5_dv::prm::{self, eq as e, status};

use super::{Event, Firmware, Reject, syndrome};

/// Opcodes of the port commands.
pub(crate) mod op {
    /// ACCESS_REG.
    pub const ACCESS_REG: u16 = 0x805;
    /// MAD_IFC.
    pub const MAD_IFC: u16 = 0x50d;
    /// QUERY_HCA_VPORT_CONTEXT.
    pub const QUERY_HCA_VPORT_CONTEXT: u16 = 0x762;
}

/// `access_register_in` and the PAOS register (`register_data` at byte 16).
mod reg {
    use mlx5_dv::prm::Field;
    pub const REGISTER_ID: Field = Field::new("register_id", 0x50, 16);
    pub const DATA: usize = 16;
    /// The PAOS register's id.
    pub const PAOS: u64 = 0x5006;
    /// Its size in bytes.
    pub const PAOS_SIZE: usize = 16;
    pub const LOCAL_PORT: Field = Field::new("paos.local_port", 0x88, 8);
    pub const ADMIN_STATUS: Field = Field::new("paos.admin_status", 0x94, 4);
    pub const OPER_STATUS: Field = Field::new("paos.oper_status", 0x9c, 4);
    pub const ASE: Field = Field::new("paos.ase", 0xa0, 1);
    /// `op_mod` of a read (0 writes).
    pub const READ: u64 = 1;
    /// admin_status / oper_status values.
    pub const UP: u64 = 1;
    pub const DOWN: u64 = 2;
    pub const UP_ONCE: u64 = 3;
}

/// `mad_ifc_in` / `mad_ifc_out`: the 256-byte MAD at byte 16.
mod mad {
    use mlx5_dv::prm::Field;
    pub const PORT: Field = Field::new("port", 0x58, 8);
    pub const AT: usize = 16;
    pub const SIZE: usize = 256;
    /// Offsets inside the MAD.
    pub const MGMT_CLASS: usize = 1;
    pub const METHOD: usize = 3;
    pub const STATUS: usize = 4;
    pub const ATTR_ID: usize = 16;
    /// The SMP's data (PortInfo) starts at byte 64 of the MAD.
    pub const SMP_DATA: usize = 64;
    pub const CLASS_SUBN_LID_ROUTED: u8 = 0x01;
    pub const CLASS_SUBN_DIRECTED_ROUTE: u8 = 0x81;
    pub const METHOD_GET: u8 = 0x01;
    pub const METHOD_GET_RESP: u8 = 0x81;
    pub const ATTR_PORT_INFO: u16 = 0x0015;
    /// MAD status: unsupported method or attribute.
    pub const STATUS_UNSUPPORTED: u16 = 0x000c;
}

/// `query_hca_vport_context_in` and the context at byte 16 of its output (512 bytes).
mod vport {
    use mlx5_dv::prm::Field;
    pub const OTHER_VPORT: Field = Field::new("other_vport", 0x40, 1);
    pub const PORT_NUM: Field = Field::new("port_num", 0x4c, 4);
    pub const CTX: usize = 16;
    pub const SIZE: usize = 512;
    /// Offsets inside the context, in bits.
    pub const PORT_PHYSICAL_STATE: Field = Field::new("port_physical_state", 0x110, 4);
    pub const PORT_STATE: Field = Field::new("port_state", 0x118, 4);
    pub const VPORT_STATE: Field = Field::new("vport_state", 0x11c, 4);
    pub const PORT_GUID: Field = Field::new("port_guid", 0x180, 64);
    pub const NODE_GUID: Field = Field::new("node_guid", 0x1c0, 64);
    pub const LID: Field = Field::new("lid", 0x300, 16);
}

/// IB port states as PortInfo and the vport context report them.
const IB_PORT_DOWN: u64 = 1;
const IB_PORT_ACTIVE: u64 = 4;
/// Physical states: LinkUp, Disabled.
const PHYS_LINK_UP: u64 = 5;
const PHYS_DISABLED: u64 = 3;

/// The port's states and what changed since the provider last looked.
#[derive(Debug, Clone)]
pub(super) struct PortState {
    admin_up: bool,
    link_up: bool,
    lid: u16,
    /// Operational states entered, oldest first.
    changes: Vec<bool>,
}

impl Default for PortState {
    fn default() -> Self {
        PortState { admin_up: true, link_up: true, lid: 0, changes: Vec::new() }
    }
}

impl PortState {
    fn oper_up(&self) -> bool {
        self.admin_up && self.link_up
    }
}

fn need(buf: &[u8], len: usize, st: u8, syn: u32) -> Result<(), Reject> {
    if buf.len() < len { Err(Reject(st, syn)) } else { Ok(()) }
}

impl Firmware {
    /// The port's LID (InfiniBand; 0 on Ethernet).
    pub(crate) fn set_port_lid(&mut self, lid: u16) {
        self.port.lid = lid;
    }

    /// The cable: the link goes up or down. With the port administratively up, the
    /// operational state follows and a PORT_STATE_CHANGE event is posted (for every call, as
    /// each is a change the caller made); administratively down, nothing is seen.
    pub(crate) fn link_changed(&mut self, port: u8, up: bool) {
        self.port.link_up = up;
        if self.port.admin_up {
            self.oper_changed(port, up);
        }
    }

    /// Whether the port is operationally up.
    pub(crate) fn port_active(&self) -> bool {
        self.port.oper_up()
    }

    /// The operational states the port entered since the last call.
    pub(crate) fn take_port_changes(&mut self) -> Vec<bool> {
        std::mem::take(&mut self.port.changes)
    }

    fn oper_changed(&mut self, port: u8, up: bool) {
        let mut data = [0u8; 28];
        data[e::eqe::PORT - e::eqe::DATA] = port << 4;
        let sub_type = if up { e::port_sub_type::ACTIVE } else { e::port_sub_type::DOWN };
        self.post_event(Event { event_type: e::event::PORT_STATE_CHANGE, sub_type, data, eqn: None });
        self.port.changes.push(up);
    }

    /// ACCESS_REG: the PAOS register of port 1; a write with `ase` sets the administrative
    /// state. Other registers and ports are BAD_PARAM.
    pub(super) fn access_reg(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        need(input, reg::DATA + reg::PAOS_SIZE, status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT)?;
        need(out, reg::DATA + reg::PAOS_SIZE, status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT)?;
        if reg::REGISTER_ID.get(input)? != reg::PAOS {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        let port = reg::LOCAL_PORT.get(input)?;
        if port != 1 {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        if prm::mbox_in::OP_MOD.get(input)? != reg::READ && reg::ASE.get(input)? != 0 {
            let up = match reg::ADMIN_STATUS.get(input)? {
                reg::UP | reg::UP_ONCE => true,
                reg::DOWN => false,
                _ => return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD)),
            };
            let was = self.port.oper_up();
            self.port.admin_up = up;
            if self.port.oper_up() != was {
                self.oper_changed(1, !was);
            }
        }
        let status_of = |up: bool| if up { reg::UP } else { reg::DOWN };
        reg::LOCAL_PORT.set(out, port)?;
        reg::ADMIN_STATUS.set(out, status_of(self.port.admin_up))?;
        reg::OPER_STATUS.set(out, status_of(self.port.oper_up()))?;
        Ok(())
    }

    /// MAD_IFC to port 1: a Get of PortInfo from the SMA answers with the LID and the port's
    /// state; any other MAD comes back with the MAD status "unsupported method/attribute".
    pub(super) fn mad_ifc(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        need(input, mad::AT + mad::SIZE, status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT)?;
        need(out, mad::AT + mad::SIZE, status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT)?;
        if mad::PORT.get(input)? != 1 {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        let (Some(req), Some(resp)) =
            (input.get(mad::AT..mad::AT + mad::SIZE), out.get_mut(mad::AT..mad::AT + mad::SIZE))
        else {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        };
        resp.copy_from_slice(req);
        resp[mad::METHOD] = mad::METHOD_GET_RESP;
        let class = req[mad::MGMT_CLASS];
        let attr = u16::from_be_bytes([req[mad::ATTR_ID], req[mad::ATTR_ID + 1]]);
        let smp = matches!(class, mad::CLASS_SUBN_LID_ROUTED | mad::CLASS_SUBN_DIRECTED_ROUTE);
        if !smp || req[mad::METHOD] != mad::METHOD_GET || attr != mad::ATTR_PORT_INFO {
            resp[mad::STATUS..mad::STATUS + 2].copy_from_slice(&mad::STATUS_UNSUPPORTED.to_be_bytes());
            return Ok(());
        }
        let info = &mut resp[mad::SMP_DATA..];
        info.iter_mut().for_each(|b| *b = 0);
        info[8..16].copy_from_slice(&self.port_gid[..8]);
        info[16..18].copy_from_slice(&self.port.lid.to_be_bytes());
        info[28] = 1; // the local port number
        let (state, phys) =
            if self.port.oper_up() { (IB_PORT_ACTIVE, PHYS_LINK_UP) } else { (IB_PORT_DOWN, PHYS_DISABLED) };
        info[32] = state as u8;
        info[33] = (phys as u8) << 4;
        Ok(())
    }

    /// QUERY_HCA_VPORT_CONTEXT of the function's own port 1 (port_num 0 or 1).
    pub(super) fn query_hca_vport_context(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        need(out, vport::CTX + vport::SIZE, status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT)?;
        if vport::OTHER_VPORT.get(input)? != 0 || vport::PORT_NUM.get(input)? > 1 {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        let guid = u64::from_be_bytes(self.port_gid[8..16].try_into().unwrap_or_default());
        let up = self.port.oper_up();
        let ctx = out.get_mut(vport::CTX..).ok_or(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT))?;
        let fields = [
            (vport::PORT_PHYSICAL_STATE, if up { PHYS_LINK_UP } else { PHYS_DISABLED }),
            (vport::PORT_STATE, if up { IB_PORT_ACTIVE } else { IB_PORT_DOWN }),
            (vport::VPORT_STATE, u64::from(up)),
            (vport::PORT_GUID, guid),
            (vport::NODE_GUID, guid),
            (vport::LID, u64::from(self.port.lid)),
        ];
        for (f, v) in fields {
            f.set(ctx, v)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Profile, ShippedProfiles};

    fn paos(op_mod: u16, admin: u64, ase: bool) -> Result<Vec<u8>, FieldErrorBox> {
        let mut input = prm::new_input(32, op::ACCESS_REG, 0, op_mod);
        reg::REGISTER_ID.set(&mut input, reg::PAOS)?;
        reg::LOCAL_PORT.set(&mut input, 1)?;
        reg::ADMIN_STATUS.set(&mut input, admin)?;
        reg::ASE.set(&mut input, u64::from(ase))?;
        Ok(input)
    }

    type FieldErrorBox = Box<dyn std::error::Error>;

    #[test]
    fn paos_sets_the_admin_state_and_the_port_follows() -> Result<(), FieldErrorBox> {
        let mut fw = Firmware::new(&Profile::builtin("cx6dx")?)?;
        let mut out = [0u8; 32];
        fw.exec(&paos(0, reg::DOWN, true)?, &mut out);
        assert_eq!(out[0], status::OK);
        assert_eq!(fw.take_port_changes(), [false]);
        assert!(!fw.port_active());
        fw.exec(&paos(0, reg::UP, false)?, &mut out);
        assert!(fw.take_port_changes().is_empty(), "without ase the admin state stays");
        fw.link_changed(1, true);
        assert!(fw.take_port_changes().is_empty(), "administratively down: the cable is not seen");
        fw.exec(&paos(reg::READ as u16, 0, false)?, &mut out);
        assert_eq!((reg::ADMIN_STATUS.get(&out)?, reg::OPER_STATUS.get(&out)?), (reg::DOWN, reg::DOWN));
        fw.exec(&paos(0, reg::UP, true)?, &mut out);
        assert_eq!(fw.take_port_changes(), [true]);
        assert_eq!((reg::ADMIN_STATUS.get(&out)?, reg::OPER_STATUS.get(&out)?), (reg::UP, reg::UP));
        fw.exec(&paos(0, 7, true)?, &mut out);
        assert_eq!(out[0], status::BAD_PARAM_ERR, "admin_status 7");
        Ok(())
    }

    #[test]
    fn port_info_mad_reports_the_state() -> Result<(), FieldErrorBox> {
        let mut fw = Firmware::new(&Profile::builtin("cx6dx")?)?;
        let mut input = prm::new_input(mad::AT + mad::SIZE, op::MAD_IFC, 0, 3);
        mad::PORT.set(&mut input, 1)?;
        input[mad::AT + mad::MGMT_CLASS] = mad::CLASS_SUBN_LID_ROUTED;
        input[mad::AT + mad::METHOD] = mad::METHOD_GET;
        input[mad::AT + mad::ATTR_ID + 1] = 0x15;
        let mut out = vec![0u8; mad::AT + mad::SIZE];
        fw.exec(&input, &mut out);
        assert_eq!(out[0], status::OK);
        assert_eq!(u64::from(out[mad::AT + mad::SMP_DATA + 32] & 0xf), IB_PORT_ACTIVE);
        assert_eq!(out[mad::AT + mad::METHOD], mad::METHOD_GET_RESP);
        input[mad::AT + mad::ATTR_ID + 1] = 0x11;
        fw.exec(&input, &mut out);
        assert_eq!(out[mad::AT + mad::STATUS + 1], 0x0c, "NodeInfo is not answered");
        Ok(())
    }
}
