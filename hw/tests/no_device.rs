//! What the hw backend does on a host like CI's: libmlx5 installed, maybe no mlx5 device.
//! Each test states what it expects for both kinds of host, so it also runs on a lab machine.

use mlx5_dv::errno::{EINVAL, ENODEV, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_dv::{Backend, BackendId, ContextHandle, DeviceKind, MkeyInitAttr, MkeyInitFlags, Op, PdHandle};
use mlx5_hw::{HwBackend, HwConfig, Mlx5Lib};

/// True if this host shows an mlx5 RDMA device in sysfs.
fn host_has_mlx5() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("mlx5")))
        .unwrap_or(false)
}

fn backend() -> HwBackend {
    HwBackend::open(HwConfig::default()).expect("libmlx5 is installed on this host (the Makefile installs it)")
}

#[test]
fn the_device_list_matches_the_host() {
    let mut b = backend();
    let mlx5: Vec<_> = match b.device_list() {
        Ok(list) => list.into_iter().filter(|d| d.kind == DeviceKind::Mlx5).collect(),
        Err(e) => {
            assert!(e.reason().starts_with("no mlx5 device found"), "{e}");
            Vec::new()
        }
    };
    assert_eq!(!mlx5.is_empty(), host_has_mlx5(), "{mlx5:?}");
    let facts = b.info().facts;
    assert_eq!(b.info().backend, "hw");
    assert!(facts.contains_key("rdma_core") && facts.contains_key("kernel"), "{facts:?}");
    if host_has_mlx5() {
        assert!(facts.contains_key("fw_ver") && facts.contains_key("node_guid"), "{facts:?}");
    }
}

#[test]
fn the_installed_rdma_core_is_named_from_its_library() {
    let lib = Mlx5Lib::load().unwrap();
    let v = lib.rdma_core_version();
    let major: u32 = v.split('.').next().and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("version {v}"));
    assert!(major >= 44, "rdma-core {v}");
}

#[test]
fn functions_newer_than_the_library_are_eopnotsupp_naming_the_release() {
    let lib = Mlx5Lib::load().unwrap();
    let v = lib.rdma_core_version().to_string();
    let major: u32 = v.split('.').next().and_then(|m| m.parse().ok()).unwrap();
    for present in [lib.reg_dmabuf_mr.is_present(), lib.get_data_direct_sysfs_path.is_present()] {
        assert_eq!(present, major >= 55, "rdma-core {v}");
    }
    if major < 55 {
        let e = lib.reg_dmabuf_mr.get(Op::Backend, &v).unwrap_err();
        assert_eq!(e.errno(), EOPNOTSUPP);
        assert!(e.reason().contains("mlx5dv_reg_dmabuf_mr") && e.reason().contains("rdma-core 55"), "{e}");
        assert!(e.reason().contains(&v), "{e}");
        let e = lib.get_data_direct_sysfs_path.get(Op::Backend, &v).unwrap_err();
        assert!(e.reason().contains("mlx5dv_get_data_direct_sysfs_path"), "{e}");
    }
    // Every function of the rdma-core 44 bindings is present.
    assert!(lib.dv.mlx5dv_create_mkey.is_ok() && lib.dv.mlx5dv_destroy_mkey.is_ok());
    assert!(lib.dv._mlx5dv_mkey_check.is_ok() && lib.dv.mlx5dv_query_device.is_ok());
    assert!(lib.dv.mlx5dv_crypto_login.is_ok() && lib.dv.mlx5dv_crypto_login_create.is_ok());
    assert!(lib.dv.mlx5dv_dek_create.is_ok() && lib.dv.mlx5dv_dek_query.is_ok() && lib.dv.mlx5dv_dek_destroy.is_ok());
}

#[test]
fn foreign_crypto_handles_never_reach_libmlx5() {
    use mlx5_dv::{CryptoLoginHandle, DekHandle, DekInitAttr, crypto};
    let mut b = backend();
    let other = BackendId::fresh();
    let ctx = ContextHandle::new(other, 1);
    let attr = mlx5_dv::CryptoLoginAttr { credential_id: 0, import_kek_id: 0, credential: [0; 48], comp_mask: 0 };
    assert_eq!(b.crypto_login(ctx, &attr).unwrap_err().errno(), EINVAL);
    assert_eq!(b.crypto_login_query_state(ctx).unwrap_err().errno(), EINVAL);
    assert_eq!(b.crypto_logout(ctx).unwrap_err().errno(), EINVAL);
    assert_eq!(b.crypto_login_query(CryptoLoginHandle::new(other, 1), 0).unwrap_err().errno(), EINVAL);
    assert_eq!(b.crypto_login_destroy(CryptoLoginHandle::new(other, 1)).unwrap_err().errno(), EINVAL);
    let dek = DekInitAttr {
        key_size: crypto::KEY_SIZE_128,
        has_keytag: false,
        key_purpose: crypto::KEY_PURPOSE_AES_XTS,
        pd: PdHandle::new(other, 1),
        opaque: [0; 8],
        key: [0; crypto::KEY_LEN],
        comp_mask: 0,
        crypto_login: None,
    };
    assert_eq!(b.dek_create(ctx, &dek).unwrap_err().errno(), EINVAL);
    assert_eq!(b.dek_query(DekHandle::new(other, 1), 0).unwrap_err().errno(), EINVAL);
    assert_eq!(b.dek_destroy(DekHandle::new(other, 1)).unwrap_err().errno(), EINVAL);
}

#[test]
fn foreign_and_stale_handles_never_reach_libmlx5() {
    let mut b = backend();
    let other = BackendId::fresh();
    let pd = PdHandle::new(other, 1);
    let attr = MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT, max_entries: 4 };
    assert_eq!(b.create_mkey(&attr).unwrap_err().errno(), EINVAL);
    assert_eq!(b.dealloc_pd(pd).unwrap_err().errno(), EINVAL);
    assert_eq!(b.close_device(ContextHandle::new(other, 1)).unwrap_err().errno(), EINVAL);
    assert_eq!(b.alloc_pd(ContextHandle::new(other, 7)).unwrap_err().errno(), EINVAL);
    assert_eq!(b.open_device("no-such-device", None).unwrap_err().errno(), ENODEV);
    assert_eq!(b.open_ibv_device("no-such-device").unwrap_err().errno(), ENODEV);
}

#[test]
fn foreign_devx_handles_never_reach_libmlx5() {
    use mlx5_dv::{
        AccessFlags, Buf, BufHandle, DevxEq, DevxObjHandle, DevxUar, DevxUmem, EqHandle, MsiVector, MsiVectorHandle,
        UarHandle, UmemHandle,
    };
    let mut b = backend();
    let other = BackendId::fresh();
    let ctx = ContextHandle::new(other, 1);
    let obj = DevxObjHandle::new(other, 1);
    let input = [0u8; 16];
    let errno = |e: mlx5_dv::Error| e.errno();
    assert_eq!(b.devx_general_cmd(ctx, &input, 16).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_obj_create(ctx, &input, 16).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_obj_query(obj, &input, 16).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_obj_modify(obj, &input, usize::MAX).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_obj_destroy(obj).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_query_eqn(ctx, 0).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_alloc_uar(ctx, mlx5_dv::MLX5DV_UAR_ALLOC_TYPE_NC).map_err(errno), Err(EINVAL));
    let uar = DevxUar { handle: UarHandle::new(other, 1), page_id: 0, reg_offset: 0x800 };
    assert_eq!(b.devx_uar_write(&uar, 0x20, &[0; 8]).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_free_uar(&uar).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_umem_reg(ctx, 0x1000, 4096, AccessFlags::LOCAL_WRITE).map_err(errno), Err(EINVAL));
    let umem = DevxUmem { handle: UmemHandle::new(other, 1), umem_id: 1 };
    assert_eq!(b.devx_umem_dereg(&umem).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_alloc_msi_vector(ctx).map_err(errno), Err(EINVAL));
    let msi = MsiVector { handle: MsiVectorHandle::new(other, 1), vector: 1, fd: 0 };
    assert_eq!(b.devx_msi_vector_read(&msi).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_free_msi_vector(&msi).map_err(errno), Err(EINVAL));
    assert_eq!(b.devx_create_eq(ctx, &[0; 272], 16).map_err(errno), Err(EINVAL));
    let ring = Buf { handle: BufHandle::new(other, 1), addr: 0x1000, len: 4096 };
    let eq = DevxEq { handle: EqHandle::new(other, 1), ring, out: Vec::new() };
    assert_eq!(b.devx_destroy_eq(&eq).map_err(errno), Err(EINVAL));
}

#[test]
fn the_vfio_devx_functions_are_in_the_installed_library() {
    // MSI vectors and EQs arrived in rdma-core 40 (MLX5_1.23); the supported floor is 44.
    let lib = Mlx5Lib::load().unwrap();
    assert!(lib.dv.mlx5dv_devx_alloc_msi_vector.is_ok() && lib.dv.mlx5dv_devx_free_msi_vector.is_ok());
    assert!(lib.dv.mlx5dv_devx_create_eq.is_ok() && lib.dv.mlx5dv_devx_destroy_eq.is_ok());
    assert!(lib.dv.mlx5dv_devx_general_cmd.is_ok() && lib.dv.mlx5dv_devx_umem_reg.is_ok());
}
