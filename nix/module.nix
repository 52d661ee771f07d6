# NixOS module: a garage node as a systemd service.
#
#   imports = [ garage.nixosModules.default ];
#   services.garage-node = {
#     enable = true;
#     environmentFile = "/run/secrets/garage.env"; # GARAGE_RPC_SECRET=…
#     settings = {
#       replication_factor = 3;
#       rpc_public_addr = "203.0.113.7:3901";
#       bootstrap_peers = [ "…@198.51.100.2:3901" ];
#     };
#   };
#
# `settings` is garage.toml as Nix (doc/configuration.md); it is written to
# /etc/garage.toml, where the `garage` CLI (installed system-wide) finds it.
# Its own namespace, so that it can sit next to nixpkgs' services.garage.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.garage-node;
  toml = pkgs.formats.toml { };
  configFile = toml.generate "garage.toml" cfg.settings;
in
{
  options.services.garage-node = {
    enable = lib.mkEnableOption "garage, a geo-distributed S3-compatible object store";

    package = lib.mkOption {
      type = lib.types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = lib.literalExpression "the flake's garage package";
      description = "The garage package to run.";
    };

    settings = lib.mkOption {
      type = toml.type;
      default = { };
      description = ''
        garage.toml as Nix (see doc/configuration.md). State defaults to
        /var/lib/garage (the service's StateDirectory); secrets belong in
        `environmentFile`, not here (this file is in the Nix store).
      '';
    };

    environmentFile = lib.mkOption {
      type = lib.types.nullOr lib.types.path;
      default = null;
      example = "/run/secrets/garage.env";
      description = ''
        Environment file with the secrets: GARAGE_RPC_SECRET,
        GARAGE_ADMIN_TOKEN, GARAGE_METRICS_TOKEN, GARAGE_SSE_MASTER_KEY
        (or their *_FILE forms).
      '';
    };

    logLevel = lib.mkOption {
      type = lib.types.str;
      default = "info";
      example = "debug";
      description = "The log filter of garage (RUST_LOG=garage=<level>).";
    };

    openFirewall = lib.mkOption {
      type = lib.types.bool;
      default = false;
      description = "Open the S3 (3900), RPC (3901) and website (3902) ports.";
    };
  };

  config = lib.mkIf cfg.enable {
    services.garage-node.settings = {
      metadata_dir = lib.mkDefault "/var/lib/garage/meta";
      data_dir = lib.mkDefault "/var/lib/garage/data";
      db_engine = lib.mkDefault "lmdb";
      replication_factor = lib.mkDefault 1;
      rpc_bind_addr = lib.mkDefault "[::]:3901";
      s3_api = {
        api_bind_addr = lib.mkDefault "[::]:3900";
        s3_region = lib.mkDefault "garage";
      };
      admin.api_bind_addr = lib.mkDefault "127.0.0.1:3903";
    };

    environment.systemPackages = [ cfg.package ];
    environment.etc."garage.toml".source = configFile;

    networking.firewall.allowedTCPPorts = lib.mkIf cfg.openFirewall [ 3900 3901 3902 ];

    systemd.services.garage = {
      description = "garage: geo-distributed S3-compatible object store";
      after = [ "network-online.target" ];
      wants = [ "network-online.target" ];
      wantedBy = [ "multi-user.target" ];
      restartTriggers = [ configFile ];
      environment.RUST_LOG = "garage=${cfg.logLevel}";
      serviceConfig = {
        ExecStart = "${lib.getExe cfg.package} -c /etc/garage.toml server";
        EnvironmentFile = lib.mkIf (cfg.environmentFile != null) cfg.environmentFile;
        Restart = "on-failure";
        RestartSec = "5s";
        TimeoutStopSec = "30s";
        LimitNOFILE = 65536;
        DynamicUser = true;
        StateDirectory = "garage";
        StateDirectoryMode = "0700";
        UMask = "0077";
        NoNewPrivileges = true;
        ProtectSystem = "strict";
        ProtectHome = true;
        PrivateTmp = true;
        PrivateDevices = true;
        ProtectKernelTunables = true;
        ProtectKernelModules = true;
        ProtectKernelLogs = true;
        ProtectControlGroups = true;
        ProtectClock = true;
        ProtectHostname = true;
        ProtectProc = "invisible";
        ProcSubset = "pid";
        RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" ];
        RestrictNamespaces = true;
        RestrictRealtime = true;
        RestrictSUIDSGID = true;
        LockPersonality = true;
        MemoryDenyWriteExecute = true;
        SystemCallArchitectures = "native";
        SystemCallFilter = [ "@system-service" "~@privileged" ];
        CapabilityBoundingSet = "";
      };
    };
  };
}
