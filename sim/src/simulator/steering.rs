//! [`Steering`] on the simulator: the provider's `mlx5dv_dr` objects over the devices' tables.

use mlx5_dv::{
    ContextHandle, DrAction, DrActionAttr, DrDomain, DrMatcher, DrObject, DrRule, DrTable, FlowAction, Result, Steering,
};

use super::Simulator;

impl Steering for Simulator {
    fn dr_domain_create(&mut self, ctx: ContextHandle, domain_type: u32) -> Result<DrDomain> {
        down!(self.dr_domain_create(ctx, domain_type))
    }
    fn dr_domain_sync(&mut self, domain: &DrDomain, flags: u32) -> Result<()> {
        down!(self.dr_domain_sync(domain, flags))
    }
    fn dr_domain_allow_duplicate_rules(&mut self, domain: &DrDomain, allow: bool) -> Result<()> {
        down!(self.dr_domain_allow_duplicate_rules(domain, allow))
    }
    fn dr_domain_dump(&mut self, domain: &DrDomain) -> Result<String> {
        down!(self.dr_domain_dump(domain))
    }
    fn dr_table_create(&mut self, domain: &DrDomain, level: u32) -> Result<DrTable> {
        down!(self.dr_table_create(domain, level))
    }
    fn dr_matcher_create(&mut self, table: &DrTable, priority: u16, criteria: u8, mask: &[u8]) -> Result<DrMatcher> {
        down!(self.dr_matcher_create(table, priority, criteria, mask))
    }
    fn dr_matcher_set_layout(&mut self, matcher: &DrMatcher, flags: u32, log_num_of_rules: u32) -> Result<()> {
        down!(self.dr_matcher_set_layout(matcher, flags, log_num_of_rules))
    }
    fn dr_action_create(&mut self, attr: &DrActionAttr) -> Result<DrAction> {
        down!(self.dr_action_create(attr))
    }
    fn dr_rule_create(&mut self, matcher: &DrMatcher, value: &[u8], actions: &[DrAction]) -> Result<DrRule> {
        down!(self.dr_rule_create(matcher, value, actions))
    }
    fn dr_destroy(&mut self, obj: DrObject) -> Result<()> {
        down!(self.dr_destroy(obj))
    }
    fn create_flow_action_packet_reformat(
        &mut self,
        ctx: ContextHandle,
        reformat_type: u32,
        ft_type: u32,
        data: &[u8],
    ) -> Result<FlowAction> {
        down!(self.create_flow_action_packet_reformat(ctx, reformat_type, ft_type, data))
    }
    fn destroy_flow_action(&mut self, action: &FlowAction) -> Result<()> {
        down!(self.destroy_flow_action(action))
    }
}
