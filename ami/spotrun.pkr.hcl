# An AMI for spotrun: the AWS Deep Learning Base AMI (NVIDIA driver, CUDA) plus PyTorch, tmux,
# spotrun and a data cache, made by the same provision script that `spotrun launch` runs on
# every instance (spotrun/provision/provision.sh). An instance started from this image finds
# everything in place: the launch only pushes its own code (tens of kB) and checks.
#
#   packer init ami/
#   packer build -var region=us-east-1 ami/spotrun.pkr.hcl
#
# then put the AMI id it prints in SPOTRUN_HOME/config.toml: [aws] image_id = "ami-...".
# See ami/README.md.

packer {
  required_plugins {
    amazon = {
      version = ">= 1.3.0"
      source  = "github.com/hashicorp/amazon"
    }
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "instance_type" {
  type        = string
  default     = "g5.xlarge"
  description = "what bakes the image; a GPU type, so the driver is exercised"
}

variable "base_image_ssm_parameter" {
  type        = string
  default     = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
  description = "the AWS Deep Learning Base AMI (the same default spotrun launches)"
}

variable "ssh_username" {
  type    = string
  default = "ubuntu"
}

variable "volume_gb" {
  type    = number
  default = 100
}

variable "data_sources" {
  type        = list(string)
  default     = []
  description = "s3:// prefixes copied into the data cache (needs iam_instance_profile)"
}

variable "iam_instance_profile" {
  type    = string
  default = ""
}

data "amazon-parameterstore" "base_image" {
  name   = var.base_image_ssm_parameter
  region = var.region
}

locals {
  root = "/home/${var.ssh_username}/.spotrun"
  code = "${local.root}/code/baked"
}

source "amazon-ebs" "spotrun" {
  region               = var.region
  instance_type        = var.instance_type
  source_ami           = data.amazon-parameterstore.base_image.value
  ssh_username         = var.ssh_username
  iam_instance_profile = var.iam_instance_profile
  ami_name             = "spotrun-${formatdate("YYYYMMDD-hhmmss", timestamp())}"
  ami_description      = "spotrun: Deep Learning Base AMI + PyTorch, tmux, spotrun, data cache"

  launch_block_device_mappings {
    device_name           = "/dev/sda1"
    volume_size           = var.volume_gb
    volume_type           = "gp3"
    encrypted             = true
    delete_on_termination = true
  }

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
  }

  tags = {
    "spotrun:image" = "true"
    "Name"          = "spotrun"
  }
  run_tags = {
    "spotrun:image-build" = "true"
  }
}

build {
  sources = ["source.amazon-ebs.spotrun"]

  # The spotrun package of this checkout, with its provision script inside.
  provisioner "shell" {
    inline = ["mkdir -p ${local.code}"]
  }
  provisioner "file" {
    source      = "${path.root}/../spotrun"
    destination = "${local.code}"
  }

  # The one provision script: tmux, spotrun's venv over the image's python, PyTorch and the
  # rest of spotrun's dependencies, the data cache folder. Idempotent.
  provisioner "shell" {
    inline = [
      "bash ${local.code}/spotrun/provision/provision.sh --python python3 --root ${local.root} --code ${local.code}",
      "${local.root}/venv/bin/python -c 'import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda)'",
      "${local.root}/venv/bin/python -c 'from sklearn.datasets import load_digits; load_digits()'",
    ]
  }

  provisioner "shell" {
    inline = [for source in var.data_sources : "aws s3 sync --only-show-errors ${source} ${local.root}/data/${basename(source)}"]
  }
}
