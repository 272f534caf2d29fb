//! [`SimControl`] on the simulator: fault rules, the command and WQE logs, and the facts only
//! a simulator can be told.

use super::*;

impl SimControl for Simulator {
    fn add_fault(&mut self, rule: FaultRule) -> Result<()> {
        let never = |what: &str| Err(Error::new(Op::Backend, EINVAL, format!("{what}: the rule can never act")));
        match rule {
            FaultRule::ObjectState { opcode, .. } => {
                use mlx5_dv::prm::opcode::{CREATE_GENERAL_OBJECT, QUERY_GENERAL_OBJECT};
                if opcode != CREATE_GENERAL_OBJECT && opcode != QUERY_GENERAL_OBJECT {
                    return never("an object-state rule on a command other than CREATE or QUERY_GENERAL_OBJECT");
                }
                let fault = CommandFault::from_rule(&rule)
                    .ok_or_else(|| Error::new(Op::Backend, EOPNOTSUPP, format!("cannot apply {rule:?}")))?;
                self.devices.iter_mut().for_each(|d| d.add_command_fault(fault));
            }
            FaultRule::CommandStatus { .. } => {
                let Some(fault) = CommandFault::from_rule(&rule) else {
                    return Err(Error::new(Op::Backend, EOPNOTSUPP, format!("cannot apply the fault rule {rule:?}")));
                };
                if fault.status == mlx5_dv::prm::status::OK {
                    return Err(Error::new(Op::Backend, EINVAL, "a command fault needs a non-zero status"));
                }
                self.devices.iter_mut().for_each(|d| d.add_command_fault(fault));
            }
            FaultRule::Completion { wqe_opcode, status, vendor_err, skip, times } => {
                if status == mlx5_dv::wc_status::SUCCESS {
                    return never("a completion fault with status 0 (success)");
                }
                // The device reports an error CQE: a syndrome and an 8-bit vendor syndrome.
                let Some(syndrome) = crate::device::engine::syndrome_of_status(status) else {
                    return never("a completion status no error CQE syndrome reports");
                };
                let Ok(vendor_err) = u8::try_from(vendor_err) else {
                    return never("a vendor_err wider than the CQE's 8-bit vendor_err_synd");
                };
                let f = WqeFault::Completion { syndrome, vendor_err };
                self.devices.iter_mut().for_each(|d| d.add_wqe_fault(wqe_opcode, f, skip, times));
            }
            FaultRule::Corrupt { wqe_opcode, offset, xor, skip, times } => {
                if xor == 0 {
                    return never("a corruption that flips no bit (xor 0)");
                }
                let f = WqeFault::Corrupt { offset, xor };
                self.devices.iter_mut().for_each(|d| d.add_wqe_fault(wqe_opcode, f, skip, times));
            }
            FaultRule::Network { device, rule } => {
                self.add_network_fault(usize::try_from(device).unwrap_or(usize::MAX), rule)?;
            }
            _ => return Err(Error::new(Op::Backend, EOPNOTSUPP, format!("cannot apply the fault rule {rule:?}"))),
        }
        Ok(())
    }

    fn transport_counters(&mut self, device: u32) -> Result<mlx5_dv::TransportCounters> {
        let dev = self.devices.get(usize::try_from(device).unwrap_or(usize::MAX));
        dev.map(Device::transport_counters)
            .ok_or_else(|| Error::new(Op::Backend, EINVAL, format!("no device {device}")))
    }

    fn clear_faults(&mut self) {
        self.devices.iter_mut().for_each(Device::clear_faults);
        for dev in 0..self.fabric.net_ports().len() {
            self.clear_network_faults(dev);
        }
    }

    fn record_commands(&mut self, on: bool) {
        self.devices.iter_mut().for_each(|d| d.record_commands(on));
    }

    fn take_commands(&mut self) -> Vec<CommandRecord> {
        self.devices.iter_mut().flat_map(Device::take_commands).collect()
    }

    fn record_wqes(&mut self, on: bool) {
        self.provider.record_wqes(on);
    }

    fn take_wqes(&mut self) -> Vec<WqeRecord> {
        self.provider.take_wqes()
    }

    fn set_port_state(&mut self, device: &str, port: u8, state: u32) -> Result<()> {
        let dev = down!(self.set_port_state(device, port, state))?;
        self.fabric.set_port_state(dev, state);
        Ok(())
    }
}
