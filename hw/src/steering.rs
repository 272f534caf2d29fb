//! [`Steering`] on hardware: not forwarded yet (nor packet
//! reformat flow actions). Every call answers EOPNOTSUPP with the
//! reason, so a case that needs `mlx5dv_dr` skips on a card instead of passing unchecked.

use mlx5_dv::errno::EOPNOTSUPP;
use mlx5_dv::{
    ContextHandle, DrAction, DrActionAttr, DrDomain, DrMatcher, DrObject, DrRule, DrTable, Error, FlowAction, Op,
    Result, Steering,
};

use crate::backend::HwBackend;

fn not_forwarded<T>(op: Op) -> Result<T> {
    Err(Error::new(op, EOPNOTSUPP, "the hw backend does not forward mlx5dv_dr yet"))
}

impl Steering for HwBackend {
    fn dr_domain_create(&mut self, _ctx: ContextHandle, _domain_type: u32) -> Result<DrDomain> {
        not_forwarded(Op::DrDomainCreate)
    }
    fn dr_domain_sync(&mut self, _domain: &DrDomain, _flags: u32) -> Result<()> {
        not_forwarded(Op::DrDomainSync)
    }
    fn dr_domain_allow_duplicate_rules(&mut self, _domain: &DrDomain, _allow: bool) -> Result<()> {
        not_forwarded(Op::DrDomainAllowDuplicateRules)
    }
    fn dr_domain_dump(&mut self, _domain: &DrDomain) -> Result<String> {
        not_forwarded(Op::DrDomainDump)
    }
    fn dr_table_create(&mut self, _domain: &DrDomain, _level: u32) -> Result<DrTable> {
        not_forwarded(Op::DrTableCreate)
    }
    fn dr_matcher_create(
        &mut self,
        _table: &DrTable,
        _priority: u16,
        _criteria: u8,
        _mask: &[u8],
    ) -> Result<DrMatcher> {
        not_forwarded(Op::DrMatcherCreate)
    }
    fn dr_matcher_set_layout(&mut self, _matcher: &DrMatcher, _flags: u32, _log: u32) -> Result<()> {
        not_forwarded(Op::DrMatcherSetLayout)
    }
    fn dr_action_create(&mut self, _attr: &DrActionAttr) -> Result<DrAction> {
        not_forwarded(Op::DrActionCreate)
    }
    fn dr_rule_create(&mut self, _matcher: &DrMatcher, _value: &[u8], _actions: &[DrAction]) -> Result<DrRule> {
        not_forwarded(Op::DrRuleCreate)
    }
    fn dr_destroy(&mut self, _obj: DrObject) -> Result<()> {
        not_forwarded(Op::DrDestroy)
    }
    fn create_flow_action_packet_reformat(
        &mut self,
        _ctx: ContextHandle,
        _reformat_type: u32,
        _ft_type: u32,
        _data: &[u8],
    ) -> Result<FlowAction> {
        not_forwarded(Op::CreateFlowActionPacketReformat)
    }
    fn destroy_flow_action(&mut self, _action: &FlowAction) -> Result<()> {
        not_forwarded(Op::DestroyFlowAction)
    }
}
