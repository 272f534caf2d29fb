//! The numbered checklist of `docs/behaviour.md`: short titles for reports, and a reader of
//! the document's items (rule, source, cases, status) for `coverage --item N` and its tests.

use std::fmt;

/// `(item number, short title)` for every checklist item; reports cite item N as `§12.N`.
pub const ITEMS: &[(u16, &str)] = &[
    (1, "mlx5dv_open_device on a non-mlx5 device: EOPNOTSUPP"),
    (2, "unknown context comp_mask or flags: EINVAL"),
    (3, "explicit DEVX refused by the kernel fails; no flags falls back silently"),
    (4, "signature caps derived from sho and sigerr_domain_and_sig_type"),
    (5, "crypto caps derived from the HCA and crypto cap pages"),
    (6, "query_device echoes SIGNATURE_OFFLOAD and CRYPTO_OFFLOAD"),
    (7, "create_mkey with create_flags 0: EOPNOTSUPP"),
    (8, "unknown create flag, or UPDATE_TAG without kernel support: EOPNOTSUPP"),
    (9, "BLOCK_SIGNATURE without signature caps: EOPNOTSUPP"),
    (10, "BLOCK_SIGNATURE creates two PSVs before the mkey; PSV failure errno via status table"),
    (11, "CRYPTO without an AES-XTS engine: EOPNOTSUPP"),
    (12, "max_entries rounded up to a multiple of 4 and written back"),
    (13, "CREATE_MKEY mkey context fields"),
    (14, "CREATE_MKEY failure: status-mapped errno, never EREMOTEIO"),
    (15, "lkey = rkey = mkey_index << 8"),
    (16, "destroy: memory PSV, wire PSV, then mkey; first failure returned"),
    (17, "VFIO context: create_mkey / destroy_mkey EOPNOTSUPP"),
    (18, "mkey ops only on RC QPs with dv send-ops flags"),
    (19, "UMR-capable QP: 192-byte overhead, max_inline_data written back"),
    (20, "wr_complete returns the stored error and posts nothing; EINVAL after RESET"),
    (21, "configure without IBV_SEND_INLINE: EOPNOTSUPP"),
    (22, "configure with unknown conf_flags or comp_mask: EOPNOTSUPP"),
    (23, "SQ full at the builder: ENOMEM"),
    (24, "tag byte update needs kernel support; mkey_7_0 from the lkey"),
    (25, "every configure makes the mkey valid"),
    (26, "setter count: 0 finalizes, fewer posts nothing, extra EINVAL"),
    (27, "setter without an open configure WR: EINVAL"),
    (28, "access-flag setter rules"),
    (29, "layout entry limits (ENOMEM) and one layout per WR (EINVAL)"),
    (30, "layouts are zero-based; interleaved mapping and 16-bit truncation"),
    (31, "configure completion: one CQE, only when signalled, opcode MLX5DV_WC_UMR"),
    (32, "the WQE after a configure carries the small fence"),
    (33, "signature setter misuse: EINVAL"),
    (34, "signature domain validation: EINVAL"),
    (35, "RESET_SIG_ATTR disables the BSF unless a signature setter follows"),
    (36, "a signature mkey never given attributes behaves as a plain mkey"),
    (37, "signature attributes carry over between configures"),
    (38, "BSF and translations must fit; length over 4 GiB with a BSF: EINVAL"),
    (39, "COPY_MASK with unlike domains: EINVAL at wr_complete"),
    (40, "automatic copy mask; user copy_mask overrides"),
    (41, "check_mask applies to the input domain's PI"),
    (42, "insert, validate, strip and copy PI per domain and direction"),
    (43, "REF_REMAP, APP_ESCAPE and APP_REF_ESCAPE"),
    (44, "PSVs initialised with the transient signature"),
    (45, "bad PI: SIG_ERR CQE with syndrome, domain, offset and values"),
    (46, "one signature error per arm until the next configure"),
    (47, "SIG_ERR CQEs never reach the application"),
    (48, "mkey_check: EINVAL on non-signature mkeys, NO_ERR, decoding"),
    (49, "guard width in mkey_check: 16, 32 or 64 bits"),
    (50, "SIG_PIPELINING: SQD and SQ_DRAINED on a signature error"),
    (51, "crypto_login errors"),
    (52, "crypto login state and logout"),
    (53, "DEK creation errors in order"),
    (54, "DEK query"),
    (55, "crypto setter errors: EINVAL"),
    (56, "single-block engine: mkey longer than a data unit: EINVAL"),
    (57, "encryption order; RAW order with signatures in both domains: EINVAL"),
    (58, "tweak byte order, DEK id and keytag in the BSF"),
    (59, "traffic through a CRYPTO mkey without crypto attributes: error CQE"),
    (60, "AES-XTS job-size rule"),
    (61, "crypto and signature ordering"),
    (62, "reg_dmabuf_mr forwards its arguments; DATA_DIRECT"),
    (63, "dma-buf registration checks in the kernel's order"),
    (64, "get_data_direct_sysfs_path: ENODEV, ENOSPC, no /sys/ prefix"),
    (65, "kernel context: EQ and MSI-vector calls EOPNOTSUPP"),
    (66, "VFIO alloc_msi_vector: first free vector, ENOSPC"),
    (67, "VFIO free_msi_vector: EINVAL cases"),
    (68, "VFIO create_eq: EINVAL checks, page size, PAS, EREMOTEIO"),
    (69, "VFIO destroy_eq: status-mapped errno"),
    (70, "query_eqn on VFIO and kernel contexts"),
    (71, "raw DEVX command failure: EREMOTEIO with status and syndrome"),
    (72, "LOCAL_INV frees the mkey and resets its tag"),
    (73, "remote invalidation through SEND_WITH_INV"),
    (74, "scatter-to-CQE and indirect mkeys"),
    (75, "send-queue depth counted in 64-byte WQEBBs: EINVAL"),
    (76, "each SET_PSV WQE needs send-queue room: ENOMEM"),
    (77, "MEMCPY send op needs DMA-MMO (EOPNOTSUPP) and a PD (EINVAL)"),
    (78, "max_recv_sge written back from the receive queue; 0 without one"),
    (79, "CQ larger than 1 << log_max_cq_sz: EINVAL"),
    (80, "OOO_DP: EOPNOTSUPP without out-of-order support"),
    (81, "crypto mkey with a signature context: RESET_SIG_ATTR rewrites the BSF"),
    (82, "destroy failing at DESTROY_MKEY leaves a plain mkey"),
    (83, "IBV_QPT_DRIVER without DC attributes fails"),
    (84, "SEND_WITH_INV invalidates after the data is placed"),
    (85, "missing mlx5dv ops are EOPNOTSUPP; long lists are not truncated"),
    (86, "ports have addresses; RTR names the responder by address and QP number"),
    (87, "send SGEs beyond max_send_sge: ENOMEM; zero-length SGEs are dropped"),
    (88, "post_recv: a full queue is ENOMEM before the SGE count is EINVAL"),
    (89, "a cleanup that fails during create_mkey sets errno"),
    (90, "a message longer than max_msg_sz: local length error"),
    (91, "interleaved stride wrapping to 0: repetitions on the same bytes"),
    (92, "signature mkey addresses past the end: protection or remote access error"),
    (93, "a QP connected to itself completes each WR once"),
    (94, "a configure on a full send queue records ENOMEM and goes on"),
    (95, "send WQEs in the send queue, byte for byte"),
    (96, "RESET removes a QP's unpolled completions from its CQs"),
    (97, "a key's range ends at its last byte: one past is an access error"),
    (98, "error CQE syndromes map to ibv_wc_status; vendor_err is the CQE's vendor syndrome"),
    (99, "no CQs or QPs on VFIO contexts; mlx5dv_create_qp only on mlx5 kernel contexts"),
    (100, "inline data is copied into the WQE; more than max_inline_data is ENOMEM"),
    (101, "ibv_modify_qp: the attribute mask against the transition, ports, P_Key index, READ depth"),
    (102, "the responder checks PSNs: ahead is a sequence error, behind a duplicate"),
    (103, "sq_sig_all: every send WR completes with a CQE"),
    (104, "ibv_post_send: no state check; ENOMEM before the first RTS; stops at the failing WR"),
    (105, "create_qp_ex: comp_mask and create_flags as libmlx5 and libibverbs check them"),
    (106, "CQs: a completion vector past the last is EINVAL; arming and channels"),
    (107, "receive completions name the sender: src_qp, slid, sl, pkey_index"),
    (108, "reg_mr: optional access bits are ignored; VFIO access rules"),
    (109, "query and modify name their object; the kernel forces the umem bits"),
    (110, "alloc_uar NC is the context's one page; umem_reg access flags"),
    (111, "QUERY_HCA_CAP: maximum and current pages, short outputs"),
    (112, "ACCESS_REG of PAOS sets the port's administrative state"),
    (113, "mailbox addresses and sizes that wrap: BAD_PARAM"),
    (114, "verbs CQs and QPs are firmware commands: logged, and a failed one is its status's errno"),
    (115, "a lost request or answer is sent again after the ACK timeout: once, in order"),
    (116, "duplicated packets take effect once: the responder acknowledges them again"),
    (117, "retry_cnt retries after the first try, then RETRY_EXC_ERR and ERR"),
    (118, "RNR NAKs: rnr_retry retries, then RNR_RETRY_EXC_ERR; 7 waits without end"),
    (119, "reordered, delayed and corrupted packets: dropped or held, and recovered"),
    (120, "a lost READ response is asked for again"),
    (121, "atomic WQEs: remote address, atomic segment, 8-byte scatter; atomic_cap HCA"),
    (122, "compare-and-swap swaps on a match only and returns the original value"),
    (123, "fetch-and-add adds modulo 2^64 and returns the original value"),
    (124, "a misaligned atomic is an invalid request: REM_INV_REQ_ERR, both QPs to ERR"),
    (125, "an atomic needs REMOTE_ATOMIC on the QP and on the key: REM_ACCESS_ERR"),
    (126, "an atomic's scatter list must hold its 8 bytes: LOC_LEN_ERR"),
    (127, "a duplicate atomic is answered from the replay cache, not executed again"),
    (128, "a lost atomic or READ answer is asked for again as soon as a later answer shows it"),
    (131, "create_srq: max_wr and max_sge limits (EINVAL) and libmlx5's rounding"),
    (132, "query_srq counts the wait queue; modify refuses a resize and a limit past the WQEs"),
    (133, "post_srq_recv: too many SGEs EINVAL, a full SRQ ENOMEM, both naming the WR"),
    (134, "a QP on an SRQ has no receive queue; destroy_srq is EBUSY while a QP uses it"),
    (135, "QPs sharing an SRQ take its WQEs in posted order; the CQE names the QP"),
    (136, "the SRQ limit event fires once when the WQEs drop below it, then disarms"),
    (137, "an empty SRQ answers RNR; a QP's error leaves the SRQ's WQEs to the others"),
    (141, "UC QPs: created and brought up by the UC rules; SEND, WRITE and their immediates"),
    (142, "UC sends once: no ACK, no retransmission; the WQE completes when its packets left"),
    (143, "UC: a lost packet drops its message up to the next FIRST or ONLY, without a NAK"),
    (144, "UC: RDMA READ (and atomics) are posted and completed in LOC_QP_OP_ERR"),
    (145, "UC: a message with no receive WQE posted is dropped, without RNR"),
    (146, "UD QPs: a SEND to an address handle, QPN and Q_Key as BTH + DETH"),
    (147, "UD receive: the 40-byte GRH area first, byte_len + 40, src_qp, IBV_WC_GRH"),
    (148, "UD: a datagram whose Q_Key is not the QP's is dropped"),
    (149, "UD: a message past the port MTU completes in LOC_LEN_ERR"),
    (150, "UD: a receive buffer too short for the GRH area and payload: LOC_LEN_ERR"),
    (151, "ibv_rereg_mr changes access, translation or PD and keeps the keys"),
    (152, "ibv_rereg_mr's refusals: EINVAL"),
    (161, "ibv_alloc_dm: MEMIC up to max_dm_size, EINVAL past it, ENOMEM when full"),
    (162, "ibv_memcpy_to_dm / from_dm: EFAULT past the end, EINVAL unaligned"),
    (163, "ibv_reg_dm_mr's refusals: EINVAL; a DM MR is zero-based"),
    (164, "RDMA WRITE, READ and SEND reach device memory through a DM MR"),
    (165, "ibv_free_dm is EBUSY while an MR uses the DM"),
    (171, "ibv_alloc_mw: types 1 and 2, EINVAL for others; a window holds its PD"),
    (172, "ibv_bind_mw's checks: EINVAL, EPERM, before anything is posted"),
    (173, "A type-1 bind: the next key, IBV_WC_BIND_MW, access inside the window only"),
    (174, "A zero-length type-1 bind unbinds: the old key is refused"),
    (175, "Type-2 binds by IBV_WR_BIND_MW and ibv_wr_bind_mw; the window's rights rule"),
    (176, "A type-2 window answers on its QP only; a bound one does not bind again"),
    (177, "Bind errors: MW_BIND_ERR from the device, EOPNOTSUPP past 2 GiB from libmlx5"),
    (178, "LOCAL_INV of a type-2 window frees it; it binds again"),
    (179, "SEND_WITH_INV invalidates a type-2 window; a type-1 key is REM_INV_REQ_ERR"),
    (180, "ibv_dealloc_mw of a bound window: its key is refused"),
    (181, "ibv_open_xrcd: fd and oflags (O_CREAT, O_EXCL, -1), one domain per inode"),
    (182, "ibv_close_xrcd is EBUSY while an XRC SRQ or QP of the opening uses it"),
    (183, "XRC SRQs: sized as basic SRQs, with a domain and a CQ they hold"),
    (184, "IBV_QPT_XRC_RECV: needs IBV_QP_INIT_ATTR_XRCD; no send queue, PD or CQs"),
    (185, "IBV_QPT_XRC_SEND: no receive side; ibv_post_recv finds it full"),
    (186, "ibv_open_qp: another handle on a target QP; it lives to its last handle"),
    (187, "XRC SENDs land in the SRQ the XRCETH names and complete on that SRQ's CQ"),
    (188, "an XRCETH naming no XRC SRQ of the target's domain: NAK invalid request"),
    (189, "RDMA over XRC: keys are checked against the named SRQ's PD"),
    (190, "an XRC initiator's WQE carries the XRC segment after the control segment"),
    (191, "mlx5dv_create_qp makes a DCI and, on an SRQ, a DCT"),
    (192, "A DCI's WQE carries the DCT's address, number and access key"),
    (193, "DC: RDMA WRITE, READ and SEND from a DCI land at the DCT"),
    (194, "DC traffic within one process is not captured (wire format not public)"),
    (195, "DC: a request with another access key is dropped at the DCT"),
    (196, "Creating a DCT: EINVAL without an SRQ or with send ops"),
    (197, "Creating a DC QP: the DC type, the QP type and DCI streams"),
    (198, "Modifying a DCT: RESET to INIT to RTR, nothing more"),
    (199, "Modifying a DCI: its own required and optional attributes up to RTS"),
    (200, "The general capability page's dct bit says whether DC QPs can be made"),
    (201, "odp_caps: the ODP capabilities ibv_query_device_ex reports"),
    (202, "IBV_ACCESS_ON_DEMAND without ODP: EOPNOTSUPP, after the EINVAL rules"),
    (203, "explicit ODP MR: EOVERFLOW, EINVAL, and no pages needed"),
    (204, "implicit ODP: ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND)"),
    (205, "RC traffic through ODP MRs on both sides"),
    (206, "ibv_advise_mr's checks and errnos"),
    (207, "ibv_advise_mr with FLUSH over unmapped pages: EFAULT, except NO_FAULT"),
    (208, "a requester's fault on unmapped ODP pages: local protection error"),
    (209, "a responder's fault on unmapped ODP pages: remote access error"),
    (210, "qp_access_flags may carry IBV_ACCESS_ON_DEMAND"),
    (211, "ibv_resize_cq: rounding, EINVAL for 0 and past the bounds"),
    (212, "ibv_resize_cq keeps the completions not yet polled; fewer is EINVAL"),
    (213, "mlx5dv_modify_qp_udp_sport: RC or UC in RTS with the cap; the packets' source port"),
    (214, "mlx5dv_reserved_qpn_alloc: numbers from RESERVED_QPN objects, forward, none a QP takes"),
    (215, "mlx5dv_reserved_qpn_dealloc: EINVAL for a number not out; an emptied object goes"),
    (216, "raw packet QPs: created in RESET by all three calls; the Ethernet segment in the overhead"),
    (217, "a raw packet QP's transitions: IBV_QP_PORT into INIT, the state alone after"),
    (218, "SCATTER_FCS, CVLAN_STRIPPING and PCI_WRITE_END_PADDING on raw packet QPs"),
    (219, "mlx5dv tunnel offloads and TIR self-loopback: raw packet QPs only, else EINVAL"),
    (220, "a raw SEND puts its bytes on the port as one frame; a rule's QP receives it"),
    (221, "a raw packet WR without an SGE: EINVAL"),
    (222, "steering: the matching rules of the best priority take a frame; no match drops it"),
    (223, "ibv_create_wq: libmlx5's sizing, uverbs' and mlx5_ib's checks; a WQ starts in RESET"),
    (224, "ibv_modify_wq: the RQ's transitions, curr_wq_state, and the CVLAN stripping flag"),
    (225, "a WQ in an indirection table, or a table under an RSS QP, is EBUSY to destroy"),
    (226, "ibv_create_rwq_ind_table: comp_mask, log_ind_tbl_size and log_max_rqt_size"),
    (227, "RSS QPs: raw packet only, no queues, a 40-byte Toeplitz key, one L3 and one L4"),
    (228, "a frame steered to an RSS QP lands on the WQ its Toeplitz hash picks"),
    (229, "a WQ takes frames in RDY only; RESET to RDY forgets its receives, ERR flushes them"),
    (230, "a destroyed QP, CQ or SRQ takes its unread asynchronous events along"),
    (231, "CM MADs: REQ, REP, RTU, REJ, DREQ and DREP at the IBTA's offsets"),
    (232, "QP 1: a UD SEND with the GSI Q_Key is kept for the connection manager, others dropped"),
    (233, "SIDR_REQ and SIDR_REP at the IBTA's offsets"),
    (234, "a REQ carries its CM response timeout and max CM retries"),
    (235, "arbitrary bytes at QP 1: no CM message, nothing broken"),
    (236, "a UD datagram to QP 0xFFFFFF reaches every QP attached to its multicast group"),
    (237, "a QP detached from a group takes none of its datagrams; detaching twice fails"),
    (238, "multicast GIDs: IPv6 multicast addresses and IPv4-mapped 224.0.0.0/4"),
    (239, "a group's datagram between processes goes to the group's IPv4 address"),
    (240, "processes forked from a networked one share its addresses through one table"),
    (241, "rsockets' private data: version 1, credits, IO map count, receive buffer size"),
    (242, "rsocket messages: SENDs with immediate data, the operation and returned credits"),
    (243, "rsocket credits: one per message; data keeps the last one for returning credits"),
    (244, "riomap's IO map message: slot, offset, address, rkey, length; riowrite's target"),
    (245, "flow counter caps: max_flow_counter, flow_counter_bulk_alloc, log_max_flow_counter_bulk"),
    (246, "ALLOC_FLOW_COUNTER: one counter or an aligned bulk; DEALLOC by the first id frees it"),
    (247, "QUERY_FLOW_COUNTER: num_of_counters counters of one allocation; clear zeroes them"),
    (248, "a bulk flow counter object answers queries of any of its counters, none past them"),
    (249, "mlx5dv_create_flow_matcher: libmlx5's checks of comp_mask, type, ft_type and ib_port"),
    (250, "mlx5dv_create_flow_matcher: mlx5_ib's checks of the mask's length and the flags"),
    (251, "a fault schedule ends as the IBTA says: each WR once, or the lost one's error and flushes"),
    (252, "dci_streams_caps: the profile's log_max_dci_stream_channels and log_max_dci_errored_streams"),
    (253, "a DCI with streams: within dci_streams_caps, EINVAL past them, EOPNOTSUPP without streams"),
    (254, "mlx5dv_wr_set_dc_addr_stream: the stream id in the control segment's dci_stream_channel_id"),
    (255, "an error on a DCI stream errs that stream alone: its later WQEs flush, the DCI stays in RTS"),
    (256, "a DCI goes to ERR once 2^log_num_errored of its streams are in error"),
    (257, "mlx5dv_dci_stream_id_reset: RTS2RTS through DEVX puts an errored stream back in service"),
    (258, "mlx5dv_map_ah_to_qp: an AV_QP_MAPPING object for an AH with a GRH; EOPNOTSUPP otherwise"),
    (259, "DC between processes: a DCT takes DC requests from the network and answers their DCI"),
    (260, "the simulator's DC wire encoding: opcodes 0xc0 plus RC's, a 16-byte DCETH (unverified)"),
    (261, "ibv_create_flow: uverbs' and mlx5_ib's checks; EBUSY to destroy a QP under a flow"),
    (262, "mlx5dv_pp_alloc: libmlx5's flags, uverbs' sizes, the DEVX uid, the rate range"),
    (263, "packet pacing entries: from index 1, shared by equal bytes, dedicated apart, ENOSPC when full"),
    (264, "mlx5dv_alloc_var: the first free doorbell page at the context's first free mmap offset"),
    (265, "mlx5dv_query_qp_lag_port and _modify_: EOPNOTSUPP on a device without LAG"),
    (266, "NIC scheduling caps: the QoS page's TSARs, queue groups, bandwidth share and rate limit"),
    (267, "SCHEDULING_ELEMENT objects: TSARs under the root or a TSAR, queue groups under a TSAR"),
    (268, "A scheduling element's modify and query: the selected fields, its own type"),
    (269, "mlx5dv_modify_qp_sched_elem: a QP's requester and responder join queue groups"),
    (271, "mlx5dv_wr_memcpy: a DMA copy through keys of the QP's PD, or a local protection error"),
    (272, "mlx5dv_wr_memcpy's length: 1 to max_wr_memcpy_length, else EINVAL at ibv_wr_complete"),
    (273, "mlx5dv_wr_raw_wqe: the program's WQE runs as written, with the queue's WQE index"),
    (274, "a UD receive on RoCE reports the packet type in sl: 0xa for RoCE v2 over IPv4"),
    (275, "a zero-length RDMA WRITE or READ checks no R_Key and no address (IBTA C9-88)"),
    (281, "tm_caps: tag matching from the HCA caps, with rendezvous on RC"),
    (282, "create_srq_ex IBV_SRQT_TM: tag list and command QP limits (EINVAL); the SRQ holds its CQ"),
    (283, "TAG_ADD takes libmlx5's free list; a full list is ENOMEM; only signaled ops complete"),
    (284, "post_srq_ops: past the command QP's max_ops outstanding is ENOMEM until one completes"),
    (285, "TAG_DEL completes IBV_WC_TM_DEL, or IBV_WC_TM_ERR for a consumed tag"),
    (286, "an eager message that matches lands after its TMH in the oldest matching tag's buffer"),
    (287, "an unmatched tagged message is unexpected; matching waits for TAG_SYNC with the count"),
    (288, "an IBV_TMH_NO_TAG message completes IBV_WC_TM_NO_TAG in an SRQ WQE, not as unexpected"),
    (289, "a matched rendezvous: the device reads the sender's data, sends FIN, completes twice"),
    (290, "a list operation behind the device's unexpected count reports IBV_WC_TM_SYNC_REQ"),
    (291, "MRA: at the IBTA's offsets; a duplicate of a message not yet answered gets one"),
    (292, "a matcher on the outer source MAC steers the frames its flow's value matches to the QP"),
    (293, "an empty matcher (no criteria) matches every frame"),
    (294, "mlx5dv_create_flow: libmlx5's action checks (one destination, one tag, one counter)"),
    (295, "mlx5dv_create_flow: the value's length, a raw packet destination QP, a 24-bit flow tag"),
    (296, "MLX5DV_FLOW_ACTION_DROP: the frames a drop rule matches reach no QP"),
    (297, "MLX5DV_FLOW_ACTION_COUNTERS_DEVX: a rule's frames count packets and octets on the counter"),
    (298, "a matcher's mask with bits outside match_criteria_enable: EINVAL at mlx5dv_create_flow"),
    (299, "mlx5dv_destroy_flow_matcher: EBUSY while its flows remain; ibv_destroy_flow ends a flow"),
    (300, "CQE compression: offered formats make a CQ; two formats, or none offered, are refused"),
    (301, "mlx5dv_create_cq: vendor mask, CQE size and flags checked (EINVAL)"),
    (302, "DEVX CREATE_TIR: a direct TIR names a receive WQ; DESTROY_TIR frees it"),
    (303, "XRC traffic through ODP MRs: a SEND gathered from one lands in an XRC SRQ's"),
    (304, "dc_odp_caps: DC's bits of the ODP capability page"),
    (305, "DC traffic through ODP MRs: a DCI's WRITE and SEND between ODP MRs"),
    (306, "mlx5dv_dr domains and tables: root tables everywhere, software tables with sw_owner"),
    (307, "mlx5dv_dr matchers and rules: libmlx5's checks, duplicates, EBUSY while in use"),
    (308, "mlx5dv_dr actions: each creation's checks"),
    (309, "mlx5dv_dr rules: libmlx5's order of actions per domain"),
    (310, "mlx5dv_dr receive steering: matchers by priority, a table's rule ends the walk"),
    (311, "mlx5dv_dr tag and counter actions: the completion's flow tag, the counter's packets"),
    (312, "mlx5dv_dr transmit steering: rewrites and VLAN pushes reach the wire, drops do not"),
    (313, "mlx5dv_dr destination arrays, samplers and TIRs"),
    (314, "packet reformat: an L2 tunnel's headers put on at transmit, taken off at receive"),
    (315, "mlx5dv_create_flow_action_packet_reformat and NIC TX flow matchers"),
    (320, "datagram rsockets: the sender's address before each UD message, its QP number over UDP"),
    (324, "a group's datagram reaches its members on other hosts through the switch's table"),
    (325, "a QP still attached to a group cannot be destroyed"),
    (326, "128-byte CQEs: the ring's entries are 128 bytes, the mlx5_cqe64 their last 64"),
    (327, "a CQ of 128-byte CQEs keeps them through resize and cleanup"),
    (328, "IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: cqc.oi where the device has cq_oi"),
    (329, "DEVX CQs: cqc.cqe_sz 1 makes 128-byte entries; cqc.oi needs cq_oi"),
    (330, "DC atomics: compare-and-swap and fetch-and-add from a DCI land at the DCT, RC's checks"),
    (331, "a DC atomic sent again is answered from the DCT's replay cache of that DCI"),
    (332, "ibv_rereg_mr of an ODP MR: PD and rights in place by UMR, the keys kept"),
    (333, "ibv_rereg_mr of an ODP MR: a new translation is a new ODP MR with new keys"),
    (334, "ibv_rereg_mr of an ODP MR: EACCES, then EOPNOTSUPP; an implicit MR made anew"),
    (335, "MRs may overlap in part; each reaches its own range"),
    (336, "a QP's CQs are its own context's: another context's CQ is EINVAL"),
    (337, "a DC message sent again is acknowledged, not received again; one ahead is NAKed"),
    (338, "a DCI's new connection (another DCT, a reset) starts its stream at the DCT anew"),
];

/// The title of a checklist item, if it exists.
pub fn title(item: u16) -> Option<&'static str> {
    ITEMS.iter().find(|(n, _)| *n == item).map(|(_, t)| *t)
}

/// `docs/behaviour.md`, embedded at build time.
pub const BEHAVIOUR_DOC: &str = include_str!("../../docs/behaviour.md");

/// Whether a checklist item is checked by the suite yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// At least one case covers the item.
    Covered,
    /// No case covers the item yet.
    NotYetSimulated,
}

/// One checklist item as `docs/behaviour.md` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocItem<'a> {
    /// The item number.
    pub number: u16,
    /// The title in its heading.
    pub title: &'a str,
    /// The `Source:` line.
    pub source: String,
    /// The case names of the `Cases:` line, in order (empty for `none`).
    pub cases: Vec<String>,
    /// The `Status:` line.
    pub status: Status,
    /// The whole item, heading included.
    pub text: &'a str,
}

/// A malformed checklist item in the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocError {
    /// The 1-based line of the problem.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for DocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "docs/behaviour.md line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for DocError {}

/// An item heading `### N. title`, as `(N, title)`. `Ok(None)` for other lines; a `###`
/// heading that starts with a digit but is not of that form is an error.
fn item_heading(line: &str) -> Result<Option<(u16, &str)>, String> {
    let Some(rest) = line.strip_prefix("### ") else { return Ok(None) };
    if !rest.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(None);
    }
    let (num, title) = rest.split_once(". ").ok_or_else(|| format!("item heading without \"N. \": {line}"))?;
    let number = num.parse::<u16>().map_err(|_| format!("bad item number {num:?}"))?;
    if title.trim().is_empty() || title != title.trim() {
        return Err(format!("item {number}: empty title or stray spaces"));
    }
    Ok(Some((number, title)))
}

/// The names of a `Cases:` value: `none`, or backticked names separated by commas.
fn case_names(value: &str) -> Result<Vec<String>, String> {
    if value == "none" {
        return Ok(Vec::new());
    }
    value
        .split(',')
        .map(|n| {
            let n = n.trim();
            n.strip_prefix('`')
                .and_then(|n| n.strip_suffix('`'))
                .filter(|n| !n.is_empty() && !n.contains('`'))
                .map(str::to_string)
                .ok_or_else(|| format!("case name not in backticks: {n:?}"))
        })
        .collect()
}

/// The three trailer lines of an item.
#[derive(Clone, Copy)]
enum Field {
    Source,
    Cases,
    Status,
}

impl Field {
    const ALL: [(Field, &'static str); 3] =
        [(Field::Source, "Source"), (Field::Cases, "Cases"), (Field::Status, "Status")];
}

/// The fields of an item being read: each `(value, line)`.
#[derive(Default)]
struct Fields {
    source: Option<(String, usize)>,
    cases: Option<(String, usize)>,
    status: Option<(String, usize)>,
}

impl Fields {
    fn slot(&mut self, f: Field) -> &mut Option<(String, usize)> {
        match f {
            Field::Source => &mut self.source,
            Field::Cases => &mut self.cases,
            Field::Status => &mut self.status,
        }
    }
}

/// An item whose heading has been read.
struct Open<'a> {
    number: u16,
    title: &'a str,
    line: usize,
    start: usize,
    fields: Fields,
    /// The field the last line belonged to, for indented continuation lines.
    last: Option<Field>,
}

impl<'a> Open<'a> {
    fn finish(self, doc: &'a str, end: usize) -> Result<DocItem<'a>, DocError> {
        let err = |line, message: String| DocError { line, message };
        let missing = |what: &str| err(self.line, format!("item {} has no {what}: line", self.number));
        let (source, _) = self.fields.source.ok_or_else(|| missing("Source"))?;
        let (cases, cl) = self.fields.cases.ok_or_else(|| missing("Cases"))?;
        let (status, sl) = self.fields.status.ok_or_else(|| missing("Status"))?;
        let cases = case_names(&cases).map_err(|m| err(cl, m))?;
        let status = match status.as_str() {
            "covered" => Status::Covered,
            "not yet simulated" => Status::NotYetSimulated,
            other => return Err(err(sl, format!("unknown status {other:?}"))),
        };
        if source.is_empty() {
            return Err(missing("Source"));
        }
        let text = doc.get(self.start..end).unwrap_or_default().trim_end();
        Ok(DocItem { number: self.number, title: self.title, source, cases, status, text })
    }
}

/// Every checklist item of `doc` (the text of `docs/behaviour.md`), in document order.
///
/// An item runs from its `### N. title` heading to the next heading. Its `- Source:`,
/// `- Cases:` and `- Status:` lines may continue on lines indented by two spaces.
pub fn parse_doc(doc: &str) -> Result<Vec<DocItem<'_>>, DocError> {
    let mut items = Vec::new();
    let mut open: Option<Open<'_>> = None;
    let mut at = 0;
    for (i, raw) in doc.split_inclusive('\n').enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches(['\n', '\r']);
        let start = at;
        at += raw.len();
        if line.starts_with('#') {
            if let Some(o) = open.take() {
                items.push(o.finish(doc, start)?);
            }
            let heading = item_heading(line).map_err(|message| DocError { line: line_no, message })?;
            if let Some((number, title)) = heading {
                open = Some(Open { number, title, line: line_no, start, fields: Fields::default(), last: None });
            }
            continue;
        }
        let Some(o) = open.as_mut() else { continue };
        if let Some(more) = line.strip_prefix("  ")
            && let Some(f) = o.last
            && let Some((value, _)) = o.fields.slot(f)
        {
            value.push(' ');
            value.push_str(more.trim());
            continue;
        }
        o.last = None;
        let Some(field) = line.strip_prefix("- ") else { continue };
        for (f, name) in Field::ALL {
            if let Some(value) = field.strip_prefix(name).and_then(|v| v.strip_prefix(':')) {
                let slot = o.fields.slot(f);
                if slot.is_some() {
                    return Err(DocError { line: line_no, message: format!("a second {name}: line") });
                }
                *slot = Some((value.trim().to_string(), line_no));
                o.last = Some(f);
            }
        }
    }
    if let Some(o) = open.take() {
        items.push(o.finish(doc, doc.len())?);
    }
    Ok(items)
}

/// The full text of item `number` of `docs/behaviour.md`, as `coverage --item N` prints it.
pub fn item_text(number: u16) -> Result<&'static str, String> {
    let items = parse_doc(BEHAVIOUR_DOC).map_err(|e| e.to_string())?;
    match items.iter().find(|i| i.number == number) {
        Some(i) => Ok(i.text),
        None => {
            let range = match (items.first(), items.last()) {
                (Some(a), Some(b)) => format!("items {}-{}", a.number, b.number),
                _ => "no items".to_string(),
            };
            Err(format!("docs/behaviour.md has no checklist item {number} ({range})"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEM: &str =
        "### 3. a title\n\nThe rule.\n\n- Source: `a/b.c`, `f`\n- Cases: `x.one`,\n  `x.two`\n- Status: covered\n";

    #[test]
    fn an_item_runs_to_the_next_heading_and_joins_continuations() -> Result<(), DocError> {
        let doc = format!("# Doc\n\n{ITEM}\n## Next\n\ntext\n");
        let items = parse_doc(&doc)?;
        assert_eq!(items.len(), 1);
        let i = &items[0];
        assert_eq!((i.number, i.title, i.source.as_str()), (3, "a title", "`a/b.c`, `f`"));
        assert_eq!(i.cases, ["x.one", "x.two"]);
        assert_eq!(i.status, Status::Covered);
        assert_eq!(i.text, ITEM.trim_end());
        Ok(())
    }

    #[test]
    fn none_and_not_yet_simulated() -> Result<(), DocError> {
        let doc = "### 9. t\n- Source: `p/q.c`, `g`\n- Cases: none\n- Status: not yet simulated\n";
        let items = parse_doc(doc)?;
        let i = &items[0];
        assert!(i.cases.is_empty());
        assert_eq!(i.status, Status::NotYetSimulated);
        Ok(())
    }

    #[test]
    fn malformed_items_are_errors() {
        for (doc, line) in [
            ("### 3 a title\n", 1),
            ("### 3. t\n- Source: `a/b`\n- Cases: none\n", 1),
            ("### 3. t\n- Source: `a/b`\n- Cases: none\n- Status: done\n", 4),
            ("### 3. t\n- Source: `a/b`\n- Cases: x.one\n- Status: covered\n", 3),
            ("### 3. t\n- Source: `a/b`\n- Cases: none\n- Cases: none\n- Status: covered\n", 4),
            ("### 70000. t\n", 1),
        ] {
            let e = parse_doc(doc).expect_err(doc);
            assert_eq!(e.line, line, "{doc}: {e}");
        }
    }

    #[test]
    fn the_embedded_document_parses_and_item_12_is_found() {
        assert!(parse_doc(BEHAVIOUR_DOC).is_ok());
        assert!(item_text(12).is_ok_and(|t| t.starts_with("### 12. ")));
        assert!(item_text(0).is_err());
    }
}
