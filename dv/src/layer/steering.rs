//! [`Steering`] through a [`Layer`]: each call as a [`Call::Dr`].

use super::{Layer, Wrapped, mismatch};
use crate::api::steering::{
    DrAction, DrActionAttr, DrDomain, DrMatcher, DrObject, DrRule, DrTable, FlowAction, Steering,
};
use crate::backend::Backend;
use crate::call::{Call, DrCall, DrReply, Reply};
use crate::error::Result;
use crate::handle::ContextHandle;

/// Dispatch a DR call and take the payload of the matching reply variant.
macro_rules! through_dr {
    ($self:ident, $call:expr, $variant:ident) => {{
        let call = Call::Dr($call);
        match $self.dispatch(call.clone()) {
            Reply::Dr(DrReply::$variant(r)) => r,
            other => mismatch(&call, &other),
        }
    }};
}

impl<L: Layer, B: Backend> Steering for Wrapped<L, B> {
    fn dr_domain_create(&mut self, ctx: ContextHandle, domain_type: u32) -> Result<DrDomain> {
        through_dr!(self, DrCall::DomainCreate { ctx, domain_type }, DomainCreate)
    }
    fn dr_domain_sync(&mut self, domain: &DrDomain, flags: u32) -> Result<()> {
        through_dr!(self, DrCall::DomainSync { domain: *domain, flags }, DomainSync)
    }
    fn dr_domain_allow_duplicate_rules(&mut self, domain: &DrDomain, allow: bool) -> Result<()> {
        through_dr!(self, DrCall::DomainAllowDuplicateRules { domain: *domain, allow }, DomainAllowDuplicateRules)
    }
    fn dr_domain_dump(&mut self, domain: &DrDomain) -> Result<String> {
        through_dr!(self, DrCall::DomainDump { domain: *domain }, DomainDump)
    }
    fn dr_table_create(&mut self, domain: &DrDomain, level: u32) -> Result<DrTable> {
        through_dr!(self, DrCall::TableCreate { domain: *domain, level }, TableCreate)
    }
    fn dr_matcher_create(&mut self, table: &DrTable, priority: u16, criteria: u8, mask: &[u8]) -> Result<DrMatcher> {
        let call = DrCall::MatcherCreate { table: *table, priority, criteria, mask: mask.to_vec() };
        through_dr!(self, call, MatcherCreate)
    }
    fn dr_matcher_set_layout(&mut self, matcher: &DrMatcher, flags: u32, log_num_of_rules: u32) -> Result<()> {
        through_dr!(self, DrCall::MatcherSetLayout { matcher: *matcher, flags, log_num_of_rules }, MatcherSetLayout)
    }
    fn dr_action_create(&mut self, attr: &DrActionAttr) -> Result<DrAction> {
        through_dr!(self, DrCall::ActionCreate { attr: attr.clone() }, ActionCreate)
    }
    fn dr_rule_create(&mut self, matcher: &DrMatcher, value: &[u8], actions: &[DrAction]) -> Result<DrRule> {
        let call = DrCall::RuleCreate { matcher: *matcher, value: value.to_vec(), actions: actions.to_vec() };
        through_dr!(self, call, RuleCreate)
    }
    fn dr_destroy(&mut self, obj: DrObject) -> Result<()> {
        through_dr!(self, DrCall::Destroy { obj }, Destroy)
    }
    fn create_flow_action_packet_reformat(
        &mut self,
        ctx: ContextHandle,
        reformat_type: u32,
        ft_type: u32,
        data: &[u8],
    ) -> Result<FlowAction> {
        let call = DrCall::CreateFlowActionPacketReformat { ctx, reformat_type, ft_type, data: data.to_vec() };
        through_dr!(self, call, CreateFlowActionPacketReformat)
    }
    fn destroy_flow_action(&mut self, action: &FlowAction) -> Result<()> {
        through_dr!(self, DrCall::DestroyFlowAction { action: *action }, DestroyFlowAction)
    }
}
