//! The `mlx5dv_dr_*` family's calls and replies, nested in [`super::Call::Dr`] and
//! [`super::Reply::Dr`].

use serde::{Deserialize, Serialize};

use crate::api::steering::{DrAction, DrActionAttr, DrDomain, DrMatcher, DrObject, DrRule, DrTable, FlowAction};
use crate::backend::Backend;
use crate::error::{Error, Op, Result};
use crate::handle::ContextHandle;

/// One call of [`crate::Steering`].
#[allow(missing_docs)] // the fields are the method's parameters, documented on the trait
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "dr", rename_all = "snake_case")]
pub enum DrCall {
    DomainCreate { ctx: ContextHandle, domain_type: u32 },
    DomainSync { domain: DrDomain, flags: u32 },
    DomainAllowDuplicateRules { domain: DrDomain, allow: bool },
    DomainDump { domain: DrDomain },
    TableCreate { domain: DrDomain, level: u32 },
    MatcherCreate { table: DrTable, priority: u16, criteria: u8, mask: Vec<u8> },
    MatcherSetLayout { matcher: DrMatcher, flags: u32, log_num_of_rules: u32 },
    ActionCreate { attr: DrActionAttr },
    RuleCreate { matcher: DrMatcher, value: Vec<u8>, actions: Vec<DrAction> },
    Destroy { obj: DrObject },
    CreateFlowActionPacketReformat { ctx: ContextHandle, reformat_type: u32, ft_type: u32, data: Vec<u8> },
    DestroyFlowAction { action: FlowAction },
}

/// The result of one [`DrCall`].
#[allow(missing_docs)] // each variant is the result of the call of the same name
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "dr", content = "result", rename_all = "snake_case")]
pub enum DrReply {
    DomainCreate(Result<DrDomain>),
    DomainSync(Result<()>),
    DomainAllowDuplicateRules(Result<()>),
    DomainDump(Result<String>),
    TableCreate(Result<DrTable>),
    MatcherCreate(Result<DrMatcher>),
    MatcherSetLayout(Result<()>),
    ActionCreate(Result<DrAction>),
    RuleCreate(Result<DrRule>),
    Destroy(Result<()>),
    CreateFlowActionPacketReformat(Result<FlowAction>),
    DestroyFlowAction(Result<()>),
}

impl DrCall {
    /// Perform the call on `b`.
    pub fn apply(&self, b: &mut dyn Backend) -> DrReply {
        match self {
            DrCall::DomainCreate { ctx, domain_type } => DrReply::DomainCreate(b.dr_domain_create(*ctx, *domain_type)),
            DrCall::DomainSync { domain, flags } => DrReply::DomainSync(b.dr_domain_sync(domain, *flags)),
            DrCall::DomainAllowDuplicateRules { domain, allow } => {
                DrReply::DomainAllowDuplicateRules(b.dr_domain_allow_duplicate_rules(domain, *allow))
            }
            DrCall::DomainDump { domain } => DrReply::DomainDump(b.dr_domain_dump(domain)),
            DrCall::TableCreate { domain, level } => DrReply::TableCreate(b.dr_table_create(domain, *level)),
            DrCall::MatcherCreate { table, priority, criteria, mask } => {
                DrReply::MatcherCreate(b.dr_matcher_create(table, *priority, *criteria, mask))
            }
            DrCall::MatcherSetLayout { matcher, flags, log_num_of_rules } => {
                DrReply::MatcherSetLayout(b.dr_matcher_set_layout(matcher, *flags, *log_num_of_rules))
            }
            DrCall::ActionCreate { attr } => DrReply::ActionCreate(b.dr_action_create(attr)),
            DrCall::RuleCreate { matcher, value, actions } => {
                DrReply::RuleCreate(b.dr_rule_create(matcher, value, actions))
            }
            DrCall::Destroy { obj } => DrReply::Destroy(b.dr_destroy(*obj)),
            DrCall::CreateFlowActionPacketReformat { ctx, reformat_type, ft_type, data } => {
                DrReply::CreateFlowActionPacketReformat(b.create_flow_action_packet_reformat(
                    *ctx,
                    *reformat_type,
                    *ft_type,
                    data,
                ))
            }
            DrCall::DestroyFlowAction { action } => DrReply::DestroyFlowAction(b.destroy_flow_action(action)),
        }
    }

    /// The operation this call performs, as errors name it.
    pub fn op(&self) -> Op {
        match self {
            DrCall::DomainCreate { .. } => Op::DrDomainCreate,
            DrCall::DomainSync { .. } => Op::DrDomainSync,
            DrCall::DomainAllowDuplicateRules { .. } => Op::DrDomainAllowDuplicateRules,
            DrCall::DomainDump { .. } => Op::DrDomainDump,
            DrCall::TableCreate { .. } => Op::DrTableCreate,
            DrCall::MatcherCreate { .. } => Op::DrMatcherCreate,
            DrCall::MatcherSetLayout { .. } => Op::DrMatcherSetLayout,
            DrCall::ActionCreate { .. } => Op::DrActionCreate,
            DrCall::RuleCreate { .. } => Op::DrRuleCreate,
            DrCall::Destroy { .. } => Op::DrDestroy,
            DrCall::CreateFlowActionPacketReformat { .. } => Op::CreateFlowActionPacketReformat,
            DrCall::DestroyFlowAction { .. } => Op::DestroyFlowAction,
        }
    }

    /// A failed reply of the right variant, carrying `err`.
    pub fn failed(&self, err: Error) -> DrReply {
        match self {
            DrCall::DomainCreate { .. } => DrReply::DomainCreate(Err(err)),
            DrCall::DomainSync { .. } => DrReply::DomainSync(Err(err)),
            DrCall::DomainAllowDuplicateRules { .. } => DrReply::DomainAllowDuplicateRules(Err(err)),
            DrCall::DomainDump { .. } => DrReply::DomainDump(Err(err)),
            DrCall::TableCreate { .. } => DrReply::TableCreate(Err(err)),
            DrCall::MatcherCreate { .. } => DrReply::MatcherCreate(Err(err)),
            DrCall::MatcherSetLayout { .. } => DrReply::MatcherSetLayout(Err(err)),
            DrCall::ActionCreate { .. } => DrReply::ActionCreate(Err(err)),
            DrCall::RuleCreate { .. } => DrReply::RuleCreate(Err(err)),
            DrCall::Destroy { .. } => DrReply::Destroy(Err(err)),
            DrCall::CreateFlowActionPacketReformat { .. } => DrReply::CreateFlowActionPacketReformat(Err(err)),
            DrCall::DestroyFlowAction { .. } => DrReply::DestroyFlowAction(Err(err)),
        }
    }
}

impl DrReply {
    /// The error inside the reply, if the call failed.
    pub fn error(&self) -> Option<&Error> {
        match self {
            DrReply::DomainCreate(r) => r.as_ref().err(),
            DrReply::DomainDump(r) => r.as_ref().err(),
            DrReply::TableCreate(r) => r.as_ref().err(),
            DrReply::MatcherCreate(r) => r.as_ref().err(),
            DrReply::ActionCreate(r) => r.as_ref().err(),
            DrReply::RuleCreate(r) => r.as_ref().err(),
            DrReply::CreateFlowActionPacketReformat(r) => r.as_ref().err(),
            DrReply::DomainSync(r)
            | DrReply::DomainAllowDuplicateRules(r)
            | DrReply::MatcherSetLayout(r)
            | DrReply::Destroy(r)
            | DrReply::DestroyFlowAction(r) => r.as_ref().err(),
        }
    }
}
