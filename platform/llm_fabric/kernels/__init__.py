"""The kernel matrix: per GPU architecture, what runs natively and what provisioning installs."""
